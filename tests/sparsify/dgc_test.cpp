// DGC: the sampled threshold, the hierarchical Top-k above 4k/3, and momentum correction
// with factor masking checked against the paper's recurrences run by hand.
#include "sparsify/dgc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "comm/communicator.h"
#include "core/rng.h"
#include "sparsify/kernels/select_cpu.h"
#include "sparsify/sparsify_hook.h"
#include "tests/sparsify/host_forms.h"

namespace st::test {
namespace {

std::vector<float> heavy_tailed(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = rng.normal() * std::abs(rng.normal());
  return x;
}

SelectContext context(int64_t n, double d) {
  SelectContext ctx;
  ctx.density = d;
  ctx.k = static_cast<int64_t>(std::floor(d * static_cast<double>(n)));
  ctx.seed = 3;
  return ctx;
}

TEST(SparsifyDgc, SampledThresholdSelectsAtOrAboveIt) {
  const int64_t n = 200000;
  const std::vector<float> x = heavy_tailed(n, 1);
  Dgc rule{DgcOptions{}};
  const SelectContext ctx = context(n, 0.01);
  Selection sel;
  select_host(rule, ctx, x.data(), n, sel);
  Dgc again{DgcOptions{}};
  const bulk::Buffer xb = buffer_of(x.data(), n);
  const float thr = again.sampled_threshold(thread_cpu_ops(), ctx, xb);
  EXPECT_EQ(sel.threshold, thr);
  const int64_t above = select::count_abs(x.data(), 0, n, thr, false);
  if (3 * above > 4 * ctx.k) {
    EXPECT_EQ(static_cast<int64_t>(sel.indices.size()), ctx.k);
  } else {
    EXPECT_EQ(static_cast<int64_t>(sel.indices.size()), above);
  }
  // 2000 samples, top 20: the estimate lands near k on this data.
  EXPECT_GT(above, ctx.k / 2);
  EXPECT_LT(above, 2 * ctx.k);
  for (int32_t i : sel.indices) ASSERT_GE(std::abs(x[i]), thr);
}

TEST(SparsifyDgc, HierarchicalTopkWhenTheSampleOverselects) {
  // Half the values share the largest magnitude: the sampled threshold passes them all
  // (> 4k/3), so the exact Top-k inside the selection keeps the k lowest positions.
  const int64_t n = 10000;
  std::vector<float> x = heavy_tailed(n, 2);
  for (int64_t i = 0; i < n; i += 2) x[i] = 100.0f;
  Dgc rule{DgcOptions{}};
  const SelectContext ctx = context(n, 0.01);
  Selection sel;
  select_host(rule, ctx, x.data(), n, sel);
  ASSERT_EQ(static_cast<int64_t>(sel.indices.size()), ctx.k);
  for (int64_t j = 0; j < ctx.k; ++j) EXPECT_EQ(sel.indices[j], 2 * j);
}

// Momentum correction (DGC eqs. 6-7) with and without factor masking, through the hook
// on one process: the update must be v at the selection, with u and v kept by hand.
void check_momentum(bool mask) {
  auto comm = make_communicator("local");
  const int64_t n = 3000, steps = 6;
  const double m = 0.9;
  SparsifierOptions opt;
  opt.density = 0.02;
  opt.seed = 5;
  DgcOptions d;
  d.momentum = m;
  d.mask = mask;
  SparsifyHook hook(std::make_unique<Dgc>(d), opt);
  std::vector<double> u(n, 0.0), v(n, 0.0), grad_sum(n, 0.0), applied(n, 0.0);
  Bucket bucket;
  bucket.numel = n;
  for (int64_t t = 0; t < steps; ++t) {
    const std::vector<float> g = heavy_tailed(n, 100 + t);
    for (int64_t i = 0; i < n; ++i) {
      u[i] = m * u[i] + g[i];
      v[i] += u[i];
      grad_sum[i] += g[i];
    }
    Tensor grads = Tensor::from_vector(g, {n});
    hook.exchange(bucket, grads, *comm, t);
    const std::vector<int32_t>& sel = hook.last_selection(0).indices;
    ASSERT_FALSE(sel.empty());
    const std::set<int32_t> chosen(sel.begin(), sel.end());
    const std::vector<float> out = grads.to_vector();
    for (int64_t i = 0; i < n; ++i) {
      const double expect = chosen.count(static_cast<int32_t>(i)) ? v[i] : 0.0;
      ASSERT_NEAR(out[i], expect, 1e-4 * (1.0 + std::abs(expect))) << "t=" << t << " i=" << i;
      applied[i] += out[i];
    }
    // The selection is DGC's rule applied to |v|.
    std::vector<float> vf(v.begin(), v.end());
    Selection ref;
    Dgc plain{DgcOptions{}};
    SelectContext ctx = context(n, opt.density);
    ctx.seed = opt.seed;
    ctx.iteration = t;
    select_host(plain, ctx, vf.data(), n, ref);
    EXPECT_EQ(ref.indices, sel) << "t=" << t;
    for (int32_t i : sel) {
      v[i] = 0.0;
      if (mask) u[i] = 0.0;
    }
    auto& rule = static_cast<Dgc&>(hook.sparsifier());
    const std::vector<float> vel = rule.velocity(0), acc = rule.accumulation(0);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(vel[i], u[i], 1e-4 * (1.0 + std::abs(u[i])));
      ASSERT_NEAR(acc[i], v[i], 1e-4 * (1.0 + std::abs(v[i])));
    }
  }
  // The hook's error feedback still balances: applied + residual = sum of gradients.
  const Tensor res = hook.residual(0);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(applied[i] + res.f32()[i], grad_sum[i], 1e-3 * (1.0 + std::abs(grad_sum[i])));
}

TEST(SparsifyDgc, MomentumCorrectionWithMasking) {
  check_momentum(true);
}
TEST(SparsifyDgc, MomentumCorrectionWithoutMasking) {
  check_momentum(false);
}

}  // namespace
}  // namespace st::test
