#include "sparsify/gaussiank.h"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <cmath>

namespace st {

namespace {
constexpr char kLoopsKey[] = "loops";  // spelled once: keys() declares it, the constructor reads it
}  // namespace

GaussianK::GaussianK(int loops) : loops_(loops) {}

std::vector<SpKey> GaussianK::keys() {
  return {whole(kLoopsKey, kLoops, "[1, inf)", "threshold counts at most")};
}

GaussianK::GaussianK(const SpValues& v) : GaussianK(static_cast<int>(v.get_int(kLoopsKey))) {}

double GaussianK::initial_threshold(double mean, double stddev, double density) {
  const double p = std::clamp(1.0 - density / 2.0, 0.5, std::nextafter(1.0, 0.0));
  return mean + stddev * boost::math::quantile(boost::math::normal(), p);
}

void GaussianK::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                          DeviceSelection& out) {
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);
  const int64_t n = x.size();
  // Mean and unbiased variance of the signed x, from sums accumulated in double.
  const bulk::Stats st = ops.stats(x, {0, n});
  const double mean = n > 0 ? st.sum / static_cast<double>(n) : 0.0;
  const double var =
      n > 1 ? std::max(0.0, (st.sum_sq - st.sum * mean) / static_cast<double>(n - 1)) : 0.0;
  double thr = initial_threshold(mean, std::sqrt(var), ctx.density);
  const double lo = 2.0 * static_cast<double>(ctx.k) / 3.0;
  const double hi = 4.0 * static_cast<double>(ctx.k) / 3.0;
  // Correction loop of the reference: count, then halve or grow the threshold; the
  // selection uses the last threshold that was counted.
  for (int loop = 0; loop < loops_; ++loop) {
    ops.select_abs(x, {0, n}, static_cast<float>(thr), /*strict=*/true, out.indices);
    const double count = static_cast<double>(out.indices.size());
    if ((count >= lo && count <= hi) || loop + 1 == loops_) break;
    thr *= count < lo ? 0.5 : 1.5;
  }
  out.threshold = thr;
}

}  // namespace st
