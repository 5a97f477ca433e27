// Hard threshold: lambda = 1/(2 sqrt(k)) and exactly {|x| >= lambda}, possibly nothing.
#include "sparsify/hard_threshold.h"

#include <gtest/gtest.h>

namespace st::test {
namespace {

TEST(SparsifyHardThreshold, FixedLambdaInclusiveMayBeEmpty) {
  HardThreshold rule;
  SelectContext ctx;
  ctx.k = 100;  // lambda = 0.05
  EXPECT_DOUBLE_EQ(HardThreshold::lambda(100), 0.05);
  std::vector<float> x = {0.01f, -0.05f, 0.2f, 0.0499f, -1.0f, 0.05f};
  Selection sel;
  rule.select(ctx, x.data(), static_cast<int64_t>(x.size()), sel);
  EXPECT_EQ(sel.indices, (std::vector<int32_t>{1, 2, 4, 5}));
  EXPECT_FLOAT_EQ(static_cast<float>(sel.threshold), 0.05f);
  EXPECT_FLOAT_EQ(static_cast<float>(rule.state_signature(0)), 0.05f);
  std::vector<float> small(1000, 0.001f);
  sel.clear();
  rule.select(ctx, small.data(), 1000, sel);
  EXPECT_TRUE(sel.indices.empty());
  EXPECT_FALSE(rule.sends_at_least_one());
}

}  // namespace
}  // namespace st::test
