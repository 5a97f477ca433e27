#include "sparsify/redsync.h"

namespace st {

namespace {
constexpr char kItersKey[] = "iters";  // spelled once: keys() declares it, the constructor reads it
}  // namespace

RedSync::RedSync(int iters) : iters_(iters) {}

std::vector<SpKey> RedSync::keys() {
  return {whole(kItersKey, kIters, "[1, inf)", "bisection steps at most")};
}

RedSync::RedSync(const SpValues& v) : RedSync(static_cast<int>(v.get_int(kItersKey))) {}

void RedSync::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                        DeviceSelection& out) {
  bulk::ThresholdOps& thresholds = bulk::need<bulk::ThresholdOps>(ops, name());
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);
  const int64_t n = x.size();
  const part::Range all{0, n};
  const bulk::Stats st = ops.stats(x, all);  // mean and max of |x|
  const double mean = n > 0 ? st.abs_sum / static_cast<double>(n) : 0.0;
  const double span = static_cast<double>(st.abs_max) - mean;
  auto thr_at = [&](double r) { return static_cast<float>(mean + r * span); };
  double lo = 0.0, hi = 1.0;
  float thr = thr_at(0.0);
  int64_t nnz = 0;
  for (int it = 0; it < iters_; ++it) {
    const double r = 0.5 * (lo + hi);
    thr = thr_at(r);
    nnz = thresholds.count_abs(x, all, thr, /*strict=*/true);
    if (nnz > ctx.k && nnz < 2 * ctx.k) break;
    (nnz >= 2 * ctx.k ? lo : hi) = r;
  }
  if (nnz == 0) thr = thr_at(lo);  // the lower end of the bracket still selects something
  ops.select_abs(x, all, thr, /*strict=*/true, out.indices);
  out.threshold = thr;
}

}  // namespace st
