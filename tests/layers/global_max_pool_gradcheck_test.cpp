// GlobalMaxPool2d (VGG's final pool): known values (its gradient check is a row of the
// layer case table, tests/layers/layer_cases.cpp).
#include <gtest/gtest.h>

#include "models/global_max_pool.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

TEST(KnownValues, GlobalMaxPool2d) {
  GlobalMaxPool2d pool;
  Tensor x = Tensor::from_vector({1, 5, 2, 0, -3, -1, -2, -4}, {1, 2, 2, 2});
  Tensor y = pool.forward(x);
  ASSERT_EQ(y.shape(), Shape({1, 2, 1, 1}));
  EXPECT_EQ(y.to_vector(), std::vector<float>({5, -1}));
  Tensor dx = pool.backward(Tensor::from_vector({2, 3}, {1, 2, 1, 1}));
  EXPECT_EQ(dx.to_vector(), std::vector<float>({0, 2, 0, 0, 0, 3, 0, 0}));
}

}  // namespace
}  // namespace st::test
