// RedSync: the bisection on r lands the count in (k, 2k) on normal and heavy-tailed data.
#include "sparsify/redsync.h"
#include "sparsify/host_select.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"

namespace st::test {
namespace {

TEST(SparsifyRedsync, CountInOpenWindow) {
  const int64_t n = 100000;
  Rng rng(9);
  std::vector<float> normal(n), heavy(n);
  for (int64_t i = 0; i < n; ++i) {
    normal[i] = rng.normal();
    heavy[i] = rng.normal() * std::abs(rng.normal());
  }
  RedSync rule;
  for (int64_t k : {100, 1000})
    for (const auto* x : {&normal, &heavy}) {
      SelectContext ctx;
      ctx.k = k;
      Selection sel;
      select_on_host(rule, ctx, x->data(), n, sel);
      const int64_t c = static_cast<int64_t>(sel.indices.size());
      EXPECT_GT(c, k);
      EXPECT_LT(c, 2 * k);
      for (int32_t i : sel.indices) ASSERT_GT(std::abs((*x)[i]), sel.threshold);
    }
}

TEST(SparsifyRedsync, ConstantMagnitudeSelectsNothing) {
  std::vector<float> x(1000, 0.0f);
  RedSync rule;
  SelectContext ctx;
  ctx.k = 10;
  Selection sel;
  select_on_host(rule, ctx, x.data(), 1000, sel);
  EXPECT_TRUE(sel.indices.empty());
}

}  // namespace
}  // namespace st::test
