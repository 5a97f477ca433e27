// Every CIFAR-style registered model runs a training step on a tiny batch of CIFAR-sized
// and Fashion-MNIST-sized input (model_step.h lists the checks). The ImageNet ResNets
// run theirs in names_test.cpp, on the model built there.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "tests/models/model_step.h"

namespace st::test {
namespace {

constexpr int64_t kClasses = 7;

// Builds `arch` once and runs a step at each side.
void run(const std::string& arch, int64_t channels, std::initializer_list<int64_t> sides) {
  Rng rng(42);
  LayerPtr model = make_model(arch, kClasses, channels, rng, *sides.begin());
  for (int64_t side : sides) check_training_step(*model, channels, side, kClasses);
}

TEST(ForwardBackward, CifarResNet20) {
  run("resnet20", 3, {32, 28});  // 28 -> 14 -> 7: option A subsamples odd sizes as the conv
  run("resnet20", 1, {28});
}

// 12 -> 12, 6, 3, 2: odd sizes through the stride-2 projections, at a fraction of the cost.
TEST(ForwardBackward, CifarResNet18) {
  run("resnet18_cifar", 1, {12});
}

// Bottleneck blocks (expansion 4) behind the CIFAR stem: 8 -> 8, 4, 2, 1.
TEST(ForwardBackward, CifarResNet152) {
  run("resnet152_cifar", 1, {8});
}

// A fixed 7x7 average pool after 32 -> 30 -> 14 -> 7 pixels: 32x32 input only; the 1x7,
// 7x1, 1x3 and 3x1 convolutions and the InceptionC pairs route every gradient.
TEST(ForwardBackward, InceptionV4) {
  run("inception_v4", 3, {32});
}

// On 32x32 the final global max-pool equals the reference 2x2 max-pool of a 2x2 map; on
// 28x28 (a 1x1 map there) it lets Fashion-MNIST through.
TEST(ForwardBackward, Vgg16) {
  run("vgg16", 3, {32, 28});
}

// GoogLeNet and SENet-18 end in a fixed 8x8 / 4x4 average pool: 32x32 input only.
TEST(ForwardBackward, CifarGoogLeNet) {
  run("googlenet", 3, {32});
}

TEST(ForwardBackward, CifarSENet18) {
  run("senet18", 3, {32});
}

// Global average pool: odd sizes through the stride-2 projections and the SE squeeze.
TEST(ForwardBackward, CifarSEResNet18) {
  run("se_resnet18", 1, {12});
}

TEST(ForwardBackward, SmallCnn) {
  run("small_cnn", 1, {28});
  run("small_cnn", 3, {32});
}

}  // namespace
}  // namespace st::test
