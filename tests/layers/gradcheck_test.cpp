// Finite-difference gradient checks: one TEST per layer (ctest lists each).
#include <memory>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pooling.h"
#include "layers/relu.h"
#include "layers/sequential.h"
#include "layers/softmax_cross_entropy.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

Tensor input(const Shape& s, uint64_t seed = 7) {
  Rng rng(seed);
  return random_tensor(s, rng);
}

// Every convolution case runs on both CPU algorithms: the im2col + GEMM reference and
// oneDNN (when built).
void check_conv(int cin, int cout, int k, int stride, int pad, bool bias, const Shape& in) {
  for (CpuConvAlgo algo : {CpuConvAlgo::Im2col, CpuConvAlgo::OneDnn}) {
    if (algo == CpuConvAlgo::OneDnn && !cpu::onednn_built()) continue;
    SCOPED_TRACE(algo == CpuConvAlgo::Im2col ? "im2col" : "oneDNN");
    Rng rng(cin * 100 + cout);
    Conv2d conv(cin, cout, k, stride, pad, bias, rng);
    conv.set_cpu_algo(algo);
    check_layer_gradients(conv, input(in));
  }
}

TEST(GradCheck, Conv2d3x3Stride1PadBias) {
  check_conv(3, 4, 3, 1, 1, true, {2, 3, 6, 6});
}
TEST(GradCheck, Conv2d3x3Stride2NoBias) {
  check_conv(4, 5, 3, 2, 1, false, {2, 4, 7, 7});
}
TEST(GradCheck, Conv2d1x1Pointwise) {
  check_conv(4, 3, 1, 1, 0, true, {3, 4, 5, 5});
}
TEST(GradCheck, Conv2d1x1Stride2) {
  check_conv(4, 6, 1, 2, 0, false, {2, 4, 6, 6});
}
TEST(GradCheck, Conv2d7x7Stride2Pad3) {
  check_conv(2, 3, 7, 2, 3, false, {2, 2, 9, 9});
}

TEST(GradCheck, BatchNorm2dTrain) {
  BatchNorm2d bn(3);
  Rng rng(6);
  bn.weight().value.copy_from(random_tensor({3}, rng));
  bn.bias().value.copy_from(random_tensor({3}, rng));
  GradCheckOptions opt;
  opt.eps = 3e-3f;
  check_layer_gradients(bn, input({4, 3, 3, 3}), opt);
}

TEST(GradCheck, BatchNorm2dEval) {
  BatchNorm2d bn(3);
  Rng rng(7);
  bn.running_mean().copy_from(random_tensor({3}, rng));
  bn.weight().value.copy_from(random_tensor({3}, rng));
  bn.set_training(false);
  check_layer_gradients(bn, input({2, 3, 4, 4}));
}

TEST(GradCheck, ReLU) {
  ReLU relu;
  check_layer_gradients(relu, input({2, 3, 4, 4}));
}

TEST(GradCheck, MaxPool2d) {
  MaxPool2d pool(3, 2, 1);
  check_layer_gradients(pool, input({2, 2, 7, 7}));
}

TEST(GradCheck, AvgPool2d) {
  AvgPool2d pool(2, 2);
  check_layer_gradients(pool, input({2, 3, 6, 6}));
}

TEST(GradCheck, AvgPool2dPadded) {
  AvgPool2d pool(3, 2, 1);
  check_layer_gradients(pool, input({2, 2, 5, 5}));
}

TEST(GradCheck, GlobalAvgPool2d) {
  GlobalAvgPool2d pool;
  check_layer_gradients(pool, input({3, 4, 5, 5}));
}

TEST(GradCheck, Linear) {
  Rng rng(8);
  Linear fc(10, 7, true, rng);
  check_layer_gradients(fc, input({5, 10}));
}

TEST(GradCheck, Dropout) {
  Dropout drop(0.3f, 99);
  drop.freeze_mask(true);
  check_layer_gradients(drop, input({4, 50}));
}

TEST(GradCheck, Flatten) {
  Flatten flat;
  check_layer_gradients(flat, input({2, 3, 2, 2}));
}

// Residual Add with a projection shortcut, inside a Sequential: the containers route
// gradients through both branches and every parameter announces itself once.
TEST(GradCheck, ResidualAddAndSequential) {
  Rng rng(9);
  auto main = std::make_unique<Sequential>();
  main->add("conv1", std::make_unique<Conv2d>(3, 4, 3, 2, 1, false, rng));
  main->add("bn1", std::make_unique<BatchNorm2d>(4));
  main->add("relu", std::make_unique<ReLU>());
  main->add("conv2", std::make_unique<Conv2d>(4, 4, 3, 1, 1, false, rng));
  auto shortcut = std::make_unique<Sequential>();
  shortcut->add("0", std::make_unique<Conv2d>(3, 4, 1, 2, 0, false, rng));
  Sequential block;
  block.add("", std::make_unique<Residual>(std::move(main), std::move(shortcut)));
  block.add("head", std::make_unique<Flatten>());
  GradCheckOptions opt;
  opt.eps = 3e-3f;
  check_layer_gradients(block, input({3, 3, 6, 6}), opt);
}

TEST(GradCheck, ResidualIdentity) {
  Rng rng(10);
  auto main = std::make_unique<Sequential>();
  main->add("conv1", std::make_unique<Conv2d>(3, 3, 3, 1, 1, true, rng));
  Residual block(std::move(main));
  check_layer_gradients(block, input({2, 3, 4, 4}));
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  Tensor logits = input({6, 5});
  Tensor labels = Tensor::from_vector_i32({0, 4, 2, 2, 1, 3}, {6});
  SoftmaxCrossEntropy loss;
  loss.forward(logits, labels);
  Tensor grad = loss.backward();
  check_scalar_gradient(
      [&](const Tensor& z) {
        SoftmaxCrossEntropy l;
        return static_cast<double>(l.forward(z, labels));
      },
      logits, grad, "SoftmaxCrossEntropy logits");
}

}  // namespace
}  // namespace st::test
