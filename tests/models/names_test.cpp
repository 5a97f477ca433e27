// Parameter and buffer names equal torchvision's state_dict keys, so checkpoints load
// in PyTorch. The expected lists follow torchvision/models/resnet.py's _make_layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "models/registry.h"

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

Shape shape_of(Layer& m, const std::string& name) {
  for (Param* p : collect_params(m))
    if (p->name == name) return p->value.shape();
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

TEST(TorchvisionNames, ResNet18) {
  Rng rng(0);
  LayerPtr m = make_model("resnet18", 1000, 3, rng);
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
  EXPECT_EQ(shape_of(*m, "layer2.0.downsample.0.weight"), Shape({128, 64, 1, 1}));
  EXPECT_EQ(shape_of(*m, "layer4.1.conv2.weight"), Shape({512, 512, 3, 3}));
  EXPECT_EQ(shape_of(*m, "fc.weight"), Shape({1000, 512}));
}

TEST(TorchvisionNames, ResNet50) {
  Rng rng(0);
  LayerPtr m = make_model("resnet50", 1000, 3, rng);
  const Named got = names_of(*m);
  // 161 parameters + 159 BatchNorm buffers = 320 state_dict keys in torchvision.
  EXPECT_EQ(got.params.size(), 161u);
  EXPECT_EQ(got.params.size() + got.buffers.size(), 320u);
  const int blocks[4] = {3, 4, 6, 3};
  const Named want = torchvision_resnet(blocks, true);
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.buffers, want.buffers);
  EXPECT_EQ(shape_of(*m, "layer1.0.downsample.0.weight"), Shape({256, 64, 1, 1}));
  EXPECT_EQ(shape_of(*m, "layer3.5.conv3.weight"), Shape({1024, 256, 1, 1}));
  EXPECT_EQ(shape_of(*m, "layer4.2.bn3.weight"), Shape({2048}));
  EXPECT_EQ(shape_of(*m, "fc.weight"), Shape({1000, 2048}));
}

TEST(ReferenceNames, CifarResNetAndVgg) {
  Rng rng(0);
  const Named r20 = names_of(*make_model("resnet20", 10, 3, rng));
  // Option A shortcuts carry no parameters: conv1, bn1, 9 blocks x (2 convs + 2 BNs), linear.
  EXPECT_EQ(r20.params.size(), 3u + 9 * 6 + 2);
  EXPECT_EQ(r20.params[3], "layer1.0.conv1.weight");
  EXPECT_EQ(r20.params.back(), "linear.bias");
  const Named r18 = names_of(*make_model("resnet18_cifar", 10, 3, rng));
  EXPECT_NE(std::find(r18.params.begin(), r18.params.end(), "layer2.0.shortcut.0.weight"),
            r18.params.end());
  EXPECT_NE(std::find(r18.buffers.begin(), r18.buffers.end(), "layer4.0.shortcut.1.running_var"),
            r18.buffers.end());
  const Named vgg = names_of(*make_model("vgg16", 10, 3, rng));
  EXPECT_EQ(vgg.params[0], "features.0.weight");
  EXPECT_EQ(vgg.params[1], "features.0.bias");
  EXPECT_EQ(vgg.params[2], "features.1.weight");
  EXPECT_EQ(vgg.params[4], "features.3.weight");  // conv-BN-ReLU take indices 0, 1, 2
  EXPECT_EQ(vgg.params[vgg.params.size() - 6], "features.40.weight");  // last conv
  EXPECT_EQ(vgg.params.back(), "classifier.bias");
}

TEST(ReferenceNames, AllUniqueInEveryModel) {
  for (const char* arch : {"resnet20", "resnet18_cifar", "vgg16", "small_cnn", "resnet34"}) {
    Rng rng(0);
    const Named n = names_of(*make_model(arch, 10, 3, rng));
    std::set<std::string> all(n.params.begin(), n.params.end());
    all.insert(n.buffers.begin(), n.buffers.end());
    EXPECT_EQ(all.size(), n.params.size() + n.buffers.size()) << arch;
  }
}

}  // namespace
}  // namespace st::test
