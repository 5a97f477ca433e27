// Gaussian-k: the normal-quantile threshold of the signed mean and deviation, and the
// corrected count landing in [2k/3, 4k/3].
#include "sparsify/gaussiank.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "sparsify/host_select.h"
#include "sparsify/kernels/select_cpu.h"

namespace st::test {
namespace {

Selection run(const std::vector<float>& x, double d) {
  GaussianK rule;
  SelectContext ctx;
  ctx.density = d;
  ctx.k = static_cast<int64_t>(std::floor(d * static_cast<double>(x.size())));
  Selection sel;
  select_on_host(rule, ctx, x.data(), static_cast<int64_t>(x.size()), sel);
  return sel;
}

TEST(SparsifyGaussiank, QuantileThreshold) {
  // Phi^{-1}(1 - 0.01/2) = 2.5758293...; mu and sigma are of the signed x.
  EXPECT_NEAR(GaussianK::initial_threshold(0.0, 1.0, 0.01), 2.5758293035489, 1e-9);
  EXPECT_NEAR(GaussianK::initial_threshold(0.5, 2.0, 0.001), 0.5 + 2.0 * 3.2905267314919, 1e-9);
}

TEST(SparsifyGaussiank, CountLandsInWindow) {
  const int64_t n = 200000;
  Rng rng(5);
  std::vector<float> normal(n), heavy(n);
  for (int64_t i = 0; i < n; ++i) {
    normal[i] = rng.normal() * 0.01f;
    heavy[i] = rng.normal() * std::abs(rng.normal()) * 0.01f;  // heavy tails: corrected
  }
  const std::vector<std::pair<const std::vector<float>*, double>> cases = {
      {&normal, 0.01}, {&normal, 0.001}, {&heavy, 0.01}};
  for (const auto& [x, d] : cases) {
    const Selection sel = run(*x, d);
    const double k = std::floor(d * n), c = static_cast<double>(sel.indices.size());
    EXPECT_GE(c, 2 * k / 3) << "d=" << d;
    EXPECT_LE(c, 4 * k / 3) << "d=" << d;
    for (int32_t i : sel.indices) ASSERT_GT(std::abs((*x)[i]), sel.threshold);
  }
  // The rule's known limit on heavy tails (Shi et al.): at d = 0.001 the Gaussian quantile
  // over-selects, x1.5 twice overshoots, and after three counts the last one stands.
  const Selection sel = run(heavy, 0.001);
  const select::Moments m = select::mean_std(heavy.data(), n);
  const double thr0 = GaussianK::initial_threshold(m.mean, std::sqrt(m.variance), 0.001);
  EXPECT_NEAR(sel.threshold, thr0 * 1.5 * 1.5, 1e-9);
  EXPECT_EQ(static_cast<int64_t>(sel.indices.size()),
            select::count_abs(heavy.data(), 0, n, static_cast<float>(sel.threshold), true));
  EXPECT_LT(static_cast<double>(sel.indices.size()), 2.0 * 200 / 3);
}

TEST(SparsifyGaussiank, AtMostThreeCorrections) {
  // A spike far outside N(mu, sigma): the threshold halves at most twice, then selects.
  std::vector<float> x(10000, 0.0f);
  x[17] = 1.0f;
  const Selection sel = run(x, 0.01);
  EXPECT_EQ(sel.indices, (std::vector<int32_t>{17}));
}

}  // namespace
}  // namespace st::test
