// Parameter counts against the reference implementations (torchvision, akamaster and
// kuangliu CIFAR code, He et al. 2016 table 6).
#include <gtest/gtest.h>

#include "models/registry.h"
#include "models/resnet_cifar.h"

namespace st::test {
namespace {

int64_t count(const std::string& arch, int64_t classes, int64_t channels = 3) {
  Rng rng(0);
  LayerPtr m = make_model(arch, classes, channels, rng);
  return count_params(*m);
}

// He et al. 2016 sec. 4.2 with option A shortcuts (parameter-free), as the paper and
// akamaster/pytorch_resnet_cifar10: 0.27M, 0.46M, 0.66M, 0.85M, 1.7M.
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

TEST(ParamCount, CifarResNet18OfMiCRO) {
  EXPECT_EQ(count("resnet18_cifar", 10), 11173962);
}

TEST(ParamCount, Vgg16Cifar) {
  EXPECT_EQ(count("vgg16", 10), 14728266);
}

// torchvision.models.resnet{18,34,50}(): sum(p.numel() for p in m.parameters()).
TEST(ParamCount, ImageNetResNets) {
  EXPECT_EQ(count("resnet18", 1000), 11689512);
  EXPECT_EQ(count("resnet34", 1000), 21797672);
  EXPECT_EQ(count("resnet50", 1000), 25557032);
}

TEST(ParamCount, SmallCnn) {
  // conv1 1*32*9 + bn 64 + conv2 32*64*9 + bn 128 + fc 64*7*7*10 + 10
  EXPECT_EQ(count("small_cnn", 10, 1), 288 + 64 + 18432 + 128 + 31360 + 10);
}

// One input channel only shrinks the stem: (3 - 1) * 16 * 3 * 3 fewer for ResNet-20.
TEST(ParamCount, OneChannelInput) {
  EXPECT_EQ(count("resnet20", 10, 1), 269722 - 2 * 16 * 9);
  EXPECT_EQ(count("resnet18", 10, 1), 11689512 - 2 * 64 * 49 - 990 * 512 - 990);
}

}  // namespace
}  // namespace st::test
