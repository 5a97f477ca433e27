#include "sparsify/hard_threshold.h"

namespace st {

void HardThreshold::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                              DeviceSelection& out) {
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);
  const float lam = static_cast<float>(lambda(ctx.k));
  lambda_[ctx.bucket] = lam;
  ops.select_abs(x, {0, x.size()}, lam, /*strict=*/false, out.indices);
  out.threshold = lam;
}

double HardThreshold::state_signature(int bucket) const {
  auto it = lambda_.find(bucket);
  return it == lambda_.end() ? 0.0 : it->second;
}

}  // namespace st
