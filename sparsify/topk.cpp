#include "sparsify/topk.h"

#include "sparsify/host_select.h"

namespace st {

void TopK::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                     DeviceSelection& out) {
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);  // global Top-k: the hook sends x there
  out.threshold = ops.topk_abs(x, {0, x.size()}, ctx.k, out.indices);
}

void TopK::select(const SelectContext& ctx, const float* x, int64_t n, Selection& out) {
  select_on_host(*this, ctx, x, n, out);
}

}  // namespace st
