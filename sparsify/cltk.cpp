#include "sparsify/cltk.h"

#include "sparsify/kernels/select_cpu.h"

namespace st {

void CltK::select(const SelectContext& ctx, const float* x, int64_t n, Selection& out) {
  if (ctx.rank != leader(ctx.iteration, ctx.world)) return;  // followers send no indices
  out.threshold = select::topk_abs(x, n, ctx.k, out.indices);
}

}  // namespace st
