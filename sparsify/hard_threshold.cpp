#include "sparsify/hard_threshold.h"

#include "sparsify/kernels/select_cpu.h"

namespace st {

void HardThreshold::select(const SelectContext& ctx, const float* x, int64_t n, Selection& out) {
  const float lam = static_cast<float>(lambda(ctx.k));
  lambda_[ctx.bucket] = lam;
  select::abs_threshold(x, 0, n, lam, /*strict=*/false, out.indices);
  out.threshold = lam;
}

double HardThreshold::state_signature(int bucket) const {
  auto it = lambda_.find(bucket);
  return it == lambda_.end() ? 0.0 : it->second;
}

}  // namespace st
