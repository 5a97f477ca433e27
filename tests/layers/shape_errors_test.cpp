// A wrong shape names the layer and both shapes.
#include <gtest/gtest.h>

#include <memory>

#include "layers/batchnorm2d.h"
#include "layers/concat.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/squeeze_excite.h"
#include "tests/error_text.h"

namespace st::test {
namespace {

TEST(ShapeErrors, Conv2dWrongChannels) {
  Rng rng(0);
  Conv2d conv(3, 16, 3, 1, 1, false, rng);
  std::string msg = error_of([&] { conv.forward(Tensor::zeros({2, 4, 8, 8})); });
  EXPECT_NE(msg.find("Conv2d(3->16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[N, 3, H, W]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 4, 8, 8]"), std::string::npos) << msg;
}

// A rectangular kernel taller than the padded input: the layer names its k7x1, p3x0.
TEST(ShapeErrors, Conv2dRectangularKernelLargerThanInput) {
  Rng rng(0);
  Conv2d conv(2, 4, Hw{1, 7}, Hw{1, 1}, Hw{0, 1}, false, rng);
  std::string msg = error_of([&] { conv.forward(Tensor::zeros({1, 2, 5, 4})); });
  EXPECT_NE(msg.find("Conv2d(2->4, k1x7, s1, p0x1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("smaller than the kernel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 2, 5, 4]"), std::string::npos) << msg;
}

TEST(ShapeErrors, LinearWrongFeatures) {
  Rng rng(0);
  Linear fc(10, 5, true, rng);
  std::string msg = error_of([&] { fc.forward(Tensor::zeros({4, 9})); });
  EXPECT_NE(msg.find("Linear(10->5)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[N, 10]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 9]"), std::string::npos) << msg;
}

TEST(ShapeErrors, BackwardGradientShape) {
  ReLU relu;
  relu.forward(Tensor::zeros({2, 3}));
  std::string msg = error_of([&] { relu.backward(Tensor::zeros({3, 2})); });
  EXPECT_NE(msg.find("ReLU"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
}

TEST(ShapeErrors, BatchNormWrongRank) {
  BatchNorm2d bn(4);
  std::string msg = error_of([&] { bn.forward(Tensor::zeros({2, 4})); });
  EXPECT_NE(msg.find("BatchNorm2d(4)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 4]"), std::string::npos) << msg;
}

TEST(ShapeErrors, SqueezeExciteWrongChannels) {
  Rng rng(0);
  SqueezeExcite se(32, 2, rng);
  std::string msg = error_of([&] { se.forward(Tensor::zeros({2, 16, 4, 4})); });
  EXPECT_NE(msg.find("SqueezeExcite(32->2)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[N, 32, H, W]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 16, 4, 4]"), std::string::npos) << msg;
}

// Branches whose maps differ in size cannot be joined on channels: the branch is named.
TEST(ShapeErrors, ConcatBranchesOfDifferentSizes) {
  Concat join;
  join.add("same", std::make_unique<ReLU>()).add("halved", std::make_unique<MaxPool2d>(2, 2));
  std::string msg = error_of([&] { join.forward(Tensor::zeros({2, 3, 4, 4})); });
  EXPECT_NE(msg.find("Concat(2 branches)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("branch halved"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3, 2, 2]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace st::test
