// Gradient-norm clipping as torch.nn.utils.clip_grad_norm_.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "optim/clip.h"

namespace st::test {
namespace {

struct TwoParams {
  Param a, b;
  TwoParams(std::vector<float> ga, std::vector<float> gb) {
    a.value = Tensor::zeros({2});
    b.value = Tensor::zeros({2});
    a.grad = Tensor::from_vector(ga, {2});
    b.grad = Tensor::from_vector(gb, {2});
  }
  std::vector<Param*> list() { return {&a, &b}; }
};

TEST(ClipGradNorm, BelowMaxUnchanged) {
  TwoParams p({3, 0}, {0, 4});  // global norm 5
  EXPECT_DOUBLE_EQ(grad_norm(p.list()), 5.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(p.list(), 10.0), 5.0);
  EXPECT_EQ(p.a.grad.to_vector(), std::vector<float>({3, 0}));
  EXPECT_EQ(p.b.grad.to_vector(), std::vector<float>({0, 4}));
}

TEST(ClipGradNorm, ScalesToMaxNorm) {
  TwoParams p({3, 0}, {0, 4});
  EXPECT_DOUBLE_EQ(clip_grad_norm(p.list(), 1.0), 5.0);  // returns the norm before clipping
  const float coef = static_cast<float>(1.0 / (5.0 + 1e-6));
  EXPECT_FLOAT_EQ(p.a.grad.to_vector()[0], 3.0f * coef);
  EXPECT_FLOAT_EQ(p.b.grad.to_vector()[1], 4.0f * coef);
  EXPECT_NEAR(grad_norm(p.list()), 1.0, 1e-6);
}

TEST(ClipGradNorm, NonFiniteNormLeavesGradients) {
  TwoParams p({std::numeric_limits<float>::quiet_NaN(), 1}, {0, 4});
  EXPECT_TRUE(std::isnan(clip_grad_norm(p.list(), 1.0)));
  EXPECT_EQ(p.b.grad.to_vector(), std::vector<float>({0, 4}));
}

TEST(ClipGradNorm, BadMaxThrows) {
  TwoParams p({1, 0}, {0, 1});
  EXPECT_THROW(clip_grad_norm(p.list(), 0.0), Error);
}

}  // namespace
}  // namespace st::test
