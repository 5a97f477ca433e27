#include "sparsify/cltk.h"

namespace st {

void CltK::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                     DeviceSelection& out) {
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);
  if (ctx.rank != leader(ctx.iteration, ctx.world)) {  // followers send no indices
    ops.resize(out.indices, bulk::Elem::I32, 0);
    return;
  }
  out.threshold = ops.topk_abs(x, {0, x.size()}, ctx.k, out.indices);
}

}  // namespace st
