#include "sparsify/topk.h"

#include "sparsify/kernels/select_cpu.h"

namespace st {

void TopK::select(const SelectContext& ctx, const float* x, int64_t n, Selection& out) {
  out.threshold = select::topk_abs(x, n, ctx.k, out.indices);
}

}  // namespace st
