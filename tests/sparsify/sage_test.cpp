// SAGE: lambda_0 = 1/(2 sqrt k), then lambda *= alpha beta gamma with alpha the ratio of
// sampled mean magnitudes, beta = 2/(1 + exp(d - d_exam)), gamma from the 10x band.
#include "sparsify/sage.h"
#include "sparsify/host_select.h"

#include <gtest/gtest.h>

#include <cmath>

namespace st::test {
namespace {

TEST(SparsifySage, SlovinSampleSize) {
  EXPECT_EQ(Sage::sample_size(25557032, 0.05), 399);
  EXPECT_EQ(Sage::sample_size(100, 0.05), 80);
  EXPECT_EQ(Sage::sample_size(1, 0.05), 1);
}

TEST(SparsifySage, AlphaBetaGammaStep) {
  // Constant magnitude c_t: every sample mean is c_t, so alpha = c_t / c_{t-1} exactly,
  // and d_exam is 1 or 0 as c_t >= alpha lambda or not.
  Sage rule{SageOptions{}};
  const int64_t n = 10000;
  SelectContext ctx;
  ctx.density = 0.01;
  ctx.k = 100;
  auto constant = [&](float c) {
    std::vector<float> x(n, c);
    for (int64_t i = 0; i < n; i += 2) x[i] = -c;
    return x;
  };
  auto step = [&](float c, int64_t t) {
    ctx.iteration = t;
    Selection sel;
    const std::vector<float> x = constant(c);
    select_on_host(rule, ctx, x.data(), n, sel);
    return static_cast<int64_t>(sel.indices.size());
  };
  // t = 0: lambda = 1/(2 sqrt(100)) = 0.05 <= 0.06: everything selected.
  EXPECT_EQ(step(0.06f, 0), n);
  EXPECT_DOUBLE_EQ(rule.lambda(0), 0.05);
  // t = 1: alpha = 2, alpha lambda = 0.1 <= 0.12: d_exam = 1, gamma = 1.05 (above 10 d).
  const double l1 = 0.05 * 2.0 * (2.0 / (1.0 + std::exp(0.01 - 1.0))) * 1.05;
  EXPECT_EQ(step(0.12f, 1), 0);  // l1 ~ 0.153 > 0.12
  EXPECT_NEAR(rule.lambda(0), l1, 1e-6);
  // t = 2: alpha = 2, alpha l1 ~ 0.306 > 0.24: d_exam = 0, gamma = 0.95 (below d/10).
  const double l2 = l1 * 2.0 * (2.0 / (1.0 + std::exp(0.01))) * 0.95;
  EXPECT_EQ(step(0.24f, 2), 0);
  EXPECT_NEAR(rule.lambda(0), l2, 1e-6);
  EXPECT_DOUBLE_EQ(rule.state_signature(0), 0.0);  // rank-local by design
}

}  // namespace
}  // namespace st::test
