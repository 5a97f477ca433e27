// Hard threshold: lambda = 1/(2 sqrt(k)) and exactly {|x| >= lambda}, possibly nothing.
#include "sparsify/hard_threshold.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "core/rng.h"
#include "sparsify/host_select.h"
#include "sparsify/kernels/select_cpu.h"

namespace st::test {
namespace {

TEST(SparsifyHardThreshold, FixedLambdaInclusiveMayBeEmpty) {
  HardThreshold rule;
  SelectContext ctx;
  ctx.k = 100;  // lambda = 0.05
  EXPECT_DOUBLE_EQ(HardThreshold::lambda(100), 0.05);
  std::vector<float> x = {0.01f, -0.05f, 0.2f, 0.0499f, -1.0f, 0.05f};
  Selection sel;
  select_on_host(rule, ctx, x.data(), static_cast<int64_t>(x.size()), sel);
  EXPECT_EQ(sel.indices, (std::vector<int32_t>{1, 2, 4, 5}));
  EXPECT_FLOAT_EQ(static_cast<float>(sel.threshold), 0.05f);
  EXPECT_FLOAT_EQ(static_cast<float>(rule.state_signature(0)), 0.05f);
  std::vector<float> small(1000, 0.001f);
  sel.clear();
  select_on_host(rule, ctx, small.data(), 1000, sel);
  EXPECT_TRUE(sel.indices.empty());
  EXPECT_FALSE(rule.sends_at_least_one());
}

// The threshold kernel every threshold rule uses (its SIMD compress path included)
// against brute force: odd lengths, strict and inclusive, sparse and dense hits, 1 and
// 2 threads, and a sub-range.
TEST(SparsifyHardThreshold, ThresholdKernelMatchesBruteForce) {
  Rng rng(11);
  const int64_t n = 300007;
  std::vector<float> x(n);
  for (auto& v : x) v = std::round(rng.normal() * 16.0f) / 16.0f;  // ties at tau
  for (float tau : {0.0f, 0.5f, 2.0f, 4.0f, 100.0f})
    for (bool strict : {false, true})
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        for (auto [b, e] : {std::pair<int64_t, int64_t>{0, n}, {5, n - 3}}) {
          std::vector<int32_t> got, want;
          select::abs_threshold(x.data(), b, e, tau, strict, got);
          for (int64_t i = b; i < e; ++i)
            if (strict ? std::abs(x[i]) > tau : std::abs(x[i]) >= tau)
              want.push_back(static_cast<int32_t>(i));
          EXPECT_EQ(got, want) << "tau=" << tau << " strict=" << strict << " threads=" << threads;
          EXPECT_EQ(select::count_abs(x.data(), b, e, tau, strict),
                    static_cast<int64_t>(want.size()));
        }
      }
}

}  // namespace
}  // namespace st::test
