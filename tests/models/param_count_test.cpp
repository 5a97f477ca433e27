// Parameter counts against the reference implementations (He et al. 2016 table 6 and
// akamaster/pytorch_resnet_cifar10; kuangliu/pytorch-cifar; torchvision). ResNet-18 and
// ResNet-50 counts sit in names_test.cpp beside their names (one build per model keeps
// the suite fast).
#include <gtest/gtest.h>

#include "models/ncf.h"
#include "models/registry.h"
#include "models/resnet_cifar.h"

namespace st::test {
namespace {

int64_t count(const std::string& arch, int64_t classes, int64_t channels = 3) {
  Rng rng(0);
  LayerPtr m = make_model(arch, classes, channels, rng);
  return count_params(*m);
}

// Option A shortcuts (parameter-free), as the paper: 0.27M, 0.46M, 0.66M, 0.85M, 1.7M.
TEST(ParamCount, CifarResNetsOptionA) {
  EXPECT_EQ(count("resnet20", 10), 269722);
  EXPECT_EQ(count("resnet32", 10), 464154);
  EXPECT_EQ(count("resnet44", 10), 658586);
  EXPECT_EQ(count("resnet56", 10), 853018);
  EXPECT_EQ(count("resnet110", 10), 1727962);
}

// Option B (1x1 projection + BN at the two widening blocks) adds 576 + 2176 parameters:
// 272,474 for ResNet-20, the figure often quoted for "ResNet-20".
TEST(ParamCount, CifarResNet20OptionB) {
  Rng rng(0);
  LayerPtr m = cifar_resnet(20, 10, 3, rng, CifarShortcut::B);
  EXPECT_EQ(count_params(*m), 272474);
}

// NeuMF on MovieLens-20M as the MLPerf reference builds it: embeddings (138,493 + 26,744)
// x (64 + 128) = 31,725,504, MLP 65,792 + 32,896 + 8,256, final 129. The registry row
// builds the same model whatever classes and channels it is given.
TEST(ParamCount, NcfOnMovieLens20m) {
  Rng rng(0);
  LayerPtr m = ncf(kMl20mUsers, kMl20mItems, rng);
  EXPECT_EQ(count_params(*m), 31832577);
  EXPECT_EQ(count("ncf", 10), 31832577);
  Rng small_rng(0);
  EXPECT_EQ(count_params(*ncf(10, 20, small_rng)), (10 + 20) * 192 + 65792 + 32896 + 8256 + 129);
}

// torchvision.models.resnet34(): sum(p.numel() for p in m.parameters()).
TEST(ParamCount, ImageNetResNet34) {
  EXPECT_EQ(count("resnet34", 1000), 21797672);
}

// The two CNNs of the papers' tables beyond ResNet-18, GoogLeNet and SENet-18, against
// sum(p.numel() for p in model.parameters()) of their PyTorch twins
// (bench/torch_cifar_models.py count ARCH CLASSES, torch 1.13), which load the reference
// implementations' state dicts name for name: kuangliu's ResNet152() and weiaicunzai's
// InceptionV4(4, 7, 3).
TEST(ParamCount, CifarResNet152) {
  EXPECT_EQ(count("resnet152_cifar", 10), 58156618);
  EXPECT_EQ(count("resnet152_cifar", 100), 58341028);
}

TEST(ParamCount, InceptionV4) {
  EXPECT_EQ(count("inception_v4", 10), 41158186);
  EXPECT_EQ(count("inception_v4", 100), 41296516);
}

TEST(ParamCount, SmallCnn) {
  // conv1 1*32*9 + bn 64 + conv2 32*64*9 + bn 128 + fc 64*7*7*10 + 10
  EXPECT_EQ(count("small_cnn", 10, 1), 288 + 64 + 18432 + 128 + 31360 + 10);
}

// One input channel only shrinks the stem: (3 - 1) * 16 * 3 * 3 fewer for ResNet-20.
TEST(ParamCount, OneChannelInput) {
  EXPECT_EQ(count("resnet20", 10, 1), 269722 - 2 * 16 * 9);
  EXPECT_EQ(count("resnet20", 100, 1), 269722 - 2 * 16 * 9 + 90 * 65);
}

}  // namespace
}  // namespace st::test
