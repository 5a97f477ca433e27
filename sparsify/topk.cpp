#include "sparsify/topk.h"

namespace st {

void TopK::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                     DeviceSelection& out) {
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);  // global Top-k: the hook sends x there
  out.threshold = ops.topk_abs(x, {0, x.size()}, ctx.k, out.indices);
}

}  // namespace st
