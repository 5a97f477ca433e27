// Random-k: k distinct sorted positions, a pure function of (seed, bucket, t), so every
// rank draws the same; a different t, bucket or seed draws a different set.
#include "sparsify/randomk.h"
#include "sparsify/host_select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace st::test {
namespace {

TEST(SparsifyRandomk, DistinctSortedInRange) {
  for (int64_t n : {1, 7, 1000, 100000})
    for (int64_t k : {int64_t{1}, n / 10 + 1, n / 2 + 1, n - 1, n}) {
      if (k < 1 || k > n) continue;
      std::vector<int32_t> idx;
      RandomK::draw(42, 3, 5, n, k, idx);
      ASSERT_EQ(static_cast<int64_t>(idx.size()), k) << "n=" << n;
      EXPECT_TRUE(std::is_sorted(idx.begin(), idx.end()));
      EXPECT_EQ(std::set<int32_t>(idx.begin(), idx.end()).size(), idx.size());
      EXPECT_GE(idx.front(), 0);
      EXPECT_LT(idx.back(), n);
    }
}

TEST(SparsifyRandomk, SameKeySameIndicesOtherKeyOtherIndices) {
  std::vector<int32_t> a, b, c, d, e;
  RandomK::draw(7, 0, 10, 50000, 500, a);
  RandomK::draw(7, 0, 10, 50000, 500, b);  // another rank, same (seed, bucket, t)
  RandomK::draw(7, 0, 11, 50000, 500, c);
  RandomK::draw(7, 1, 10, 50000, 500, d);
  RandomK::draw(8, 0, 10, 50000, 500, e);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  EXPECT_NE(a, e);
  // Through the Sparsifier interface the rank does not matter.
  RandomK rule;
  SelectContext ctx;
  ctx.seed = 7;
  ctx.iteration = 10;
  ctx.k = 500;
  Selection s0, s3;
  const std::vector<float> x(50000, 0.0f);  // never read: the positions depend on n only
  ctx.rank = 0;
  select_on_host(rule, ctx, x.data(), 50000, s0);
  ctx.rank = 3;
  select_on_host(rule, ctx, x.data(), 50000, s3);
  EXPECT_EQ(s0.indices, a);
  EXPECT_EQ(s3.indices, a);
}

TEST(SparsifyRandomk, RoughlyUniform) {
  // Over many draws every tenth of the range gets about a tenth of the picks.
  const int64_t n = 10000, k = 100;
  std::vector<int64_t> bins(10, 0);
  for (int64_t t = 0; t < 500; ++t) {
    std::vector<int32_t> idx;
    RandomK::draw(1, 0, t, n, k, idx);
    for (int32_t i : idx) ++bins[i * 10 / n];
  }
  for (int64_t b : bins) EXPECT_NEAR(static_cast<double>(b), 5000.0, 300.0);
}

}  // namespace
}  // namespace st::test
