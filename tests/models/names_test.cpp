// Names, shapes and counts against the reference implementations. ImageNet ResNets must
// equal torchvision's state_dict keys (so checkpoints load in PyTorch); the expected
// lists follow torchvision/models/resnet.py's _make_layer. One model build per test, which
// also runs a training step for the ImageNet ResNets (small inputs keep it fast).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/ops.h"
#include "models/registry.h"
#include "tests/models/model_step.h"

namespace st::test {
namespace {

struct Named {
  std::vector<std::string> params, buffers;
};

Named names_of(Layer& m) {
  Named n;
  for (Param* p : collect_params(m)) n.params.push_back(p->name);
  for (Buffer* b : collect_buffers(m)) n.buffers.push_back(b->name);
  return n;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

void expect_unique(const Named& n) {
  std::set<std::string> all(n.params.begin(), n.params.end());
  all.insert(n.buffers.begin(), n.buffers.end());
  EXPECT_EQ(all.size(), n.params.size() + n.buffers.size()) << "duplicate names";
}

void add_bn(Named& n, const std::string& prefix) {
  n.params.push_back(prefix + ".weight");
  n.params.push_back(prefix + ".bias");
  for (const char* b : {".running_mean", ".running_var", ".num_batches_tracked"})
    n.buffers.push_back(prefix + b);
}

// torchvision's named_parameters() / buffers() order for a ResNet.
Named torchvision_resnet(const int (&blocks)[4], bool bottleneck) {
  Named n;
  n.params.push_back("conv1.weight");
  add_bn(n, "bn1");
  for (int stage = 0; stage < 4; ++stage) {
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".";
      for (int c = 1; c <= (bottleneck ? 3 : 2); ++c) {
        n.params.push_back(p + "conv" + std::to_string(c) + ".weight");
        add_bn(n, p + "bn" + std::to_string(c));
      }
      // A downsample where the shape changes: every first block but layer1's in
      // BasicBlock nets; every first block in Bottleneck nets (64 -> 256).
      if (b == 0 && (stage > 0 || bottleneck)) {
        n.params.push_back(p + "downsample.0.weight");
        add_bn(n, p + "downsample.1");
      }
    }
  }
  n.params.push_back("fc.weight");
  n.params.push_back("fc.bias");
  return n;
}

Param* find_param(Layer& m, const std::string& name) {
  for (Param* p : collect_params(m))
    if (p->name == name) return p;
  ADD_FAILURE() << "no parameter " << name;
  return nullptr;
}

Shape shape_of(Layer& m, const std::string& name) {
  Param* p = find_param(m, name);
  return p ? p->value.shape() : Shape{};
}

TEST(TorchvisionResNet, ResNet18NamesCountInitAndStep) {
  Rng rng(0);
  LayerPtr m = make_model("resnet18", 1000, 3, rng);
  EXPECT_EQ(count_params(*m), 11689512);
  const Named got = names_of(*m);
  // 62 parameters + 60 BatchNorm buffers = 122 state_dict keys in torchvision.
  EXPECT_EQ(got.params.size(), 62u);
  EXPECT_EQ(got.params.size() + got.buffers.size(), 122u);
  const int blocks[4] = {2, 2, 2, 2};
  const Named want = torchvision_resnet(blocks, false);
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.buffers, want.buffers);
  EXPECT_EQ(got.params.front(), "conv1.weight");
  EXPECT_EQ(got.buffers.front(), "bn1.running_mean");
  EXPECT_EQ(got.params[3], "layer1.0.conv1.weight");
  EXPECT_EQ(got.params.back(), "fc.bias");
  EXPECT_EQ(shape_of(*m, "conv1.weight"), Shape({64, 3, 7, 7}));
  EXPECT_EQ(shape_of(*m, "layer2.0.downsample.0.weight"), Shape({128, 64, 1, 1}));
  EXPECT_EQ(shape_of(*m, "layer4.1.conv2.weight"), Shape({512, 512, 3, 3}));
  EXPECT_EQ(shape_of(*m, "fc.weight"), Shape({1000, 512}));
  // torchvision init: kaiming_normal(fan_out) on convs, BN weight 1 and bias 0.
  Param* w = find_param(*m, "layer3.0.conv2.weight");  // [256, 256, 3, 3], fan_out 2304
  ASSERT_NE(w, nullptr);
  const double std = std::sqrt(sum_squares(w->value) / static_cast<double>(w->value.numel()));
  EXPECT_NEAR(std, std::sqrt(2.0 / 2304.0), 0.01 * std::sqrt(2.0 / 2304.0));
  EXPECT_EQ(find_param(*m, "bn1.weight")->value.to_vector(), std::vector<float>(64, 1.0f));
  EXPECT_EQ(find_param(*m, "bn1.bias")->value.to_vector(), std::vector<float>(64, 0.0f));
  // A training step on Fashion-MNIST-sized input: 28 -> 14 -> 7 -> 4 -> 2 -> 1.
  check_training_step(*m, 3, 28, 1000);
}

TEST(TorchvisionResNet, ResNet50NamesCountAndStep) {
  Rng rng(0);
  LayerPtr m = make_model("resnet50", 1000, 3, rng);
  EXPECT_EQ(count_params(*m), 25557032);
  const Named got = names_of(*m);
  // 161 parameters + 159 BatchNorm buffers = 320 state_dict keys in torchvision.
  EXPECT_EQ(got.params.size(), 161u);
  EXPECT_EQ(got.params.size() + got.buffers.size(), 320u);
  const int blocks[4] = {3, 4, 6, 3};
  const Named want = torchvision_resnet(blocks, true);
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.buffers, want.buffers);
  EXPECT_EQ(shape_of(*m, "layer1.0.downsample.0.weight"), Shape({256, 64, 1, 1}));
  EXPECT_EQ(shape_of(*m, "layer2.0.conv2.weight"), Shape({128, 128, 3, 3}));
  EXPECT_EQ(shape_of(*m, "layer3.5.conv3.weight"), Shape({1024, 256, 1, 1}));
  EXPECT_EQ(shape_of(*m, "layer4.2.bn3.weight"), Shape({2048}));
  EXPECT_EQ(shape_of(*m, "fc.weight"), Shape({1000, 2048}));
  check_training_step(*m, 3, 32, 1000);
}

// akamaster names: conv1, bn1, layer{1,2,3}.{i}.{conv,bn}{1,2}, linear; option A
// shortcuts carry no parameters.
TEST(ReferenceNames, CifarResNet20) {
  Rng rng(0);
  const Named n = names_of(*make_model("resnet20", 10, 3, rng));
  EXPECT_EQ(n.params.size(), 3u + 9 * 6 + 2);  // conv1+bn1, 9 blocks x (2 conv + 2 BN), linear
  EXPECT_EQ(n.params[3], "layer1.0.conv1.weight");
  EXPECT_TRUE(contains(n.params, "layer3.2.bn2.bias"));
  EXPECT_EQ(n.params.back(), "linear.bias");
  expect_unique(n);
}

// kuangliu names: ..., layer2.0.shortcut.{0,1}, linear; 11,173,962 parameters.
TEST(ReferenceNames, CifarResNet18NamesAndCount) {
  Rng rng(0);
  LayerPtr m = make_model("resnet18_cifar", 10, 3, rng);
  EXPECT_EQ(count_params(*m), 11173962);
  const Named n = names_of(*m);
  EXPECT_EQ(shape_of(*m, "conv1.weight"), Shape({64, 3, 3, 3}));
  EXPECT_TRUE(contains(n.params, "layer2.0.shortcut.0.weight"));
  EXPECT_TRUE(contains(n.buffers, "layer4.0.shortcut.1.running_var"));
  EXPECT_FALSE(contains(n.params, "layer1.0.shortcut.0.weight"));  // identity there
  EXPECT_EQ(n.params.back(), "linear.bias");
  expect_unique(n);
}

// kuangliu GoogLeNet: pre_layers.{0,1}, Inception branches b1..b4 with the reference's
// nn.Sequential indices (b4.0 is the max-pool), linear.
TEST(ReferenceNames, GoogLeNetNames) {
  Rng rng(0);
  LayerPtr m = make_model("googlenet", 10, 3, rng);
  const Named n = names_of(*m);
  EXPECT_EQ(n.params[0], "pre_layers.0.weight");
  EXPECT_EQ(n.params[1], "pre_layers.0.bias");
  EXPECT_EQ(shape_of(*m, "a3.b1.0.weight"), Shape({64, 192, 1, 1}));
  EXPECT_EQ(shape_of(*m, "a3.b3.6.weight"), Shape({32, 32, 3, 3}));  // the second 3x3
  EXPECT_EQ(shape_of(*m, "b5.b4.1.weight"), Shape({128, 832, 1, 1}));
  EXPECT_TRUE(contains(n.buffers, "e4.b2.4.running_mean"));
  EXPECT_EQ(shape_of(*m, "linear.weight"), Shape({10, 1024}));
  expect_unique(n);
}

// kuangliu SENet18: pre-activation blocks with fc1/fc2 and a bias-free 1x1 shortcut.0.
TEST(ReferenceNames, SENet18Names) {
  Rng rng(0);
  LayerPtr m = make_model("senet18", 10, 3, rng);
  const Named n = names_of(*m);
  EXPECT_EQ(shape_of(*m, "layer1.0.bn1.weight"), Shape({64}));
  EXPECT_EQ(shape_of(*m, "layer2.0.bn1.weight"), Shape({64}));  // before the projection
  EXPECT_EQ(shape_of(*m, "layer2.0.shortcut.0.weight"), Shape({128, 64, 1, 1}));
  EXPECT_FALSE(contains(n.params, "layer2.0.shortcut.0.bias"));
  EXPECT_FALSE(contains(n.params, "layer1.0.shortcut.0.weight"));  // identity there
  EXPECT_EQ(shape_of(*m, "layer3.1.fc1.weight"), Shape({16, 256, 1, 1}));
  EXPECT_EQ(shape_of(*m, "layer3.1.fc2.bias"), Shape({256}));
  expect_unique(n);
}

TEST(ReferenceNames, SEResNet18Names) {
  Rng rng(0);
  LayerPtr m = make_model("se_resnet18", 100, 3, rng);
  const Named n = names_of(*m);
  EXPECT_TRUE(contains(n.buffers, "layer4.0.shortcut.1.running_var"));
  EXPECT_EQ(shape_of(*m, "layer4.1.fc1.weight"), Shape({32, 512, 1, 1}));
  EXPECT_EQ(shape_of(*m, "linear.weight"), Shape({100, 512}));
  expect_unique(n);
}

// kuangliu ResNet152(): Bottleneck blocks [3, 8, 36, 3] with conv1..conv3, bn1..bn3, a
// projection shortcut on every stage's first block (layer1 widens 64 -> 256), linear.
TEST(ReferenceNames, CifarResNet152Names) {
  Rng rng(0);
  LayerPtr m = make_model("resnet152_cifar", 10, 3, rng);
  const Named n = names_of(*m);
  EXPECT_EQ(n.params[0], "conv1.weight");
  EXPECT_EQ(shape_of(*m, "layer1.0.shortcut.0.weight"), Shape({256, 64, 1, 1}));
  EXPECT_EQ(shape_of(*m, "layer3.35.conv2.weight"), Shape({256, 256, 3, 3}));
  EXPECT_EQ(shape_of(*m, "layer4.0.conv2.weight"), Shape({512, 512, 3, 3}));
  EXPECT_EQ(shape_of(*m, "layer4.2.conv3.weight"), Shape({2048, 512, 1, 1}));
  EXPECT_FALSE(contains(n.params, "layer3.1.shortcut.0.weight"));  // identity there
  EXPECT_FALSE(contains(n.params, "layer3.36.conv1.weight"));
  EXPECT_TRUE(contains(n.buffers, "layer2.7.bn3.running_mean"));
  EXPECT_EQ(shape_of(*m, "linear.weight"), Shape({10, 2048}));
  expect_unique(n);
}

// weiaicunzai InceptionV4(4, 7, 3): BasicConv2d children conv/bn, the blocks named
// InceptionA_0 .. InceptionC_2, the rectangular kernels as [Cout, Cin, KH, KW].
TEST(ReferenceNames, InceptionV4Names) {
  Rng rng(0);
  LayerPtr m = make_model("inception_v4", 100, 3, rng);
  const Named n = names_of(*m);
  EXPECT_EQ(n.params[0], "stem.conv1.0.conv.weight");
  EXPECT_EQ(shape_of(*m, "stem.branch7x7a.1.conv.weight"), Shape({64, 64, 7, 1}));
  EXPECT_EQ(shape_of(*m, "stem.branch7x7a.2.conv.weight"), Shape({64, 64, 1, 7}));
  EXPECT_EQ(shape_of(*m, "stem.branchpoolb.conv.weight"), Shape({192, 192, 3, 3}));
  EXPECT_EQ(shape_of(*m, "inception_a.InceptionA_3.branchpool.1.conv.weight"),
            Shape({96, 384, 1, 1}));
  EXPECT_EQ(shape_of(*m, "reduction_a.branch3x3.conv.weight"), Shape({384, 384, 3, 3}));
  EXPECT_EQ(shape_of(*m, "inception_b.InceptionB_6.branch7x7stack.4.conv.weight"),
            Shape({256, 224, 7, 1}));
  EXPECT_EQ(shape_of(*m, "reduction_b.branch7x7.3.conv.weight"), Shape({320, 320, 3, 3}));
  EXPECT_EQ(shape_of(*m, "inception_c.InceptionC_0.branch3x3a.conv.weight"),
            Shape({256, 384, 3, 1}));
  EXPECT_EQ(shape_of(*m, "inception_c.InceptionC_2.branch3x3stackb.conv.weight"),
            Shape({256, 512, 3, 1}));
  EXPECT_TRUE(contains(n.buffers, "inception_c.InceptionC_1.branch3x3stack.2.bn.running_var"));
  EXPECT_FALSE(contains(n.params, "stem.conv1.0.conv.bias"));
  EXPECT_EQ(shape_of(*m, "linear.weight"), Shape({100, 1536}));
  expect_unique(n);
}

// kuangliu VGG('VGG16'): features.{i} with conv-BN-ReLU at i, i+1, i+2; 14,728,266.
TEST(ReferenceNames, Vgg16NamesAndCount) {
  Rng rng(0);
  LayerPtr m = make_model("vgg16", 10, 3, rng);
  EXPECT_EQ(count_params(*m), 14728266);
  const Named n = names_of(*m);
  EXPECT_EQ(n.params[0], "features.0.weight");
  EXPECT_EQ(n.params[1], "features.0.bias");
  EXPECT_EQ(n.params[2], "features.1.weight");
  EXPECT_EQ(n.params[4], "features.3.weight");
  EXPECT_EQ(n.params[n.params.size() - 6], "features.40.weight");  // the last conv
  EXPECT_EQ(shape_of(*m, "classifier.weight"), Shape({10, 512}));
  expect_unique(n);
}

}  // namespace
}  // namespace st::test
