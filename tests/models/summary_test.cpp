// `sparsetrain models`: exact parameter counts against reference modules written in plain
// torch.nn (torch 1.13, sum(p.numel() for p in m.parameters())): kuangliu/pytorch-cifar's
// ResNet18, VGG('VGG16'), GoogLeNet and SENet18 (the counts of the MiCRO, ExDyna and
// SIDCo run scripts; bench/torch_cifar_models.py count), akamaster/pytorch_resnet_cifar10's
// resnet20 (option A shortcuts: strided slice and zero padding, no parameters; option B: 1x1 conv +
// BN) and torchvision's ResNet-50 written out layer by layer. The table of layers sums to the same
// counts, and the listings keep their formats.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "models/resnet_cifar.h"
#include "models/summary.h"

namespace st::test {
namespace {

int64_t params(const std::string& arch, int64_t classes, int64_t channels = 3) {
  return count_arch(arch, classes, channels).params;
}

TEST(ModelSummary, CifarResNet18MatchesKuangliu) {
  EXPECT_EQ(params("resnet18_cifar", 10), 11173962);
  EXPECT_EQ(params("resnet18_cifar", 100), 11220132);
}

TEST(ModelSummary, CifarGoogLeNetMatchesKuangliu) {
  EXPECT_EQ(params("googlenet", 10), 6166250);
  EXPECT_EQ(params("googlenet", 100), 6258500);
}

TEST(ModelSummary, CifarSENet18MatchesKuangliu) {
  EXPECT_EQ(params("senet18", 10), 11260354);
  EXPECT_EQ(params("senet18", 100), 11306524);
}

// resnet18_cifar plus one SE module per block: 2 p^2/16 + p/16 + p for p planes.
TEST(ModelSummary, CifarSEResNet18IsResNet18PlusTheSEModules) {
  EXPECT_EQ(params("se_resnet18", 10), 11263042);
  EXPECT_EQ(params("se_resnet18", 100), 11309212);
  int64_t se = 0;
  for (int64_t p : {64, 128, 256, 512}) se += 2 * (2 * p * p / 16 + p / 16 + p);
  EXPECT_EQ(params("se_resnet18", 10), params("resnet18_cifar", 10) + se);
}

// The registry's resnet20 is the paper's option A: 269,722 (He et al. 2016: 0.27M).
// 272,474 is option B, the projection shortcuts, which the registry does not build.
TEST(ModelSummary, ResNet20OptionAAndB) {
  EXPECT_EQ(params("resnet20", 10), 269722);
  Rng rng(0);
  LayerPtr b = cifar_resnet(20, 10, 3, rng, CifarShortcut::B);
  int64_t sum = 0;
  for (const LayerRow& r : layer_rows(*b)) sum += r.params;
  EXPECT_EQ(sum, 272474);
}

TEST(ModelSummary, ImageNetResNet50MatchesTorchvision) {
  EXPECT_EQ(params("resnet50", 1000), 25557032);
}

// The registry's vgg16 is the CIFAR VGG-16 with BatchNorm and a Linear(512, classes)
// classifier (kuangliu), not torchvision's vgg16_bn (4096-wide classifier, 138,365,992).
TEST(ModelSummary, CifarVgg16MatchesKuangliu) {
  EXPECT_EQ(params("vgg16", 10), 14728266);
  EXPECT_EQ(params("vgg16", 100), 14774436);
}

TEST(ModelSummary, CountRowCarriesTheRegistryRow) {
  const ArchCount c = count_arch("resnet18_cifar", 100, 1);
  EXPECT_EQ(c.info.name, "resnet18_cifar");
  EXPECT_EQ(c.info.image_size, 32);
  EXPECT_EQ(c.classes, 100);
  EXPECT_EQ(c.channels, 1);
  EXPECT_EQ(c.params, 11220132 - 2 * 64 * 9);  // a one-channel stem
}

TEST(ModelSummary, RefusesWhatCannotBeBuilt) {
  EXPECT_THROW(count_arch("resnet20", 0, 3), Error);
  EXPECT_THROW(count_arch("resnet20", 10, 0), Error);
  EXPECT_THROW(count_arch("lstm", 10, 3), Error);  // sized by its corpus: not a registry row
  EXPECT_THROW(arch_summary("no_such_arch", 10, 3), Error);
}

TEST(ModelSummary, ThousandsSeparators) {
  EXPECT_EQ(with_thousands(0), "0");
  EXPECT_EQ(with_thousands(999), "999");
  EXPECT_EQ(with_thousands(1000), "1,000");
  EXPECT_EQ(with_thousands(269722), "269,722");
  EXPECT_EQ(with_thousands(11173962), "11,173,962");
  EXPECT_EQ(with_thousands(-1234567), "-1,234,567");
}

// One row per layer that owns parameters, named as PyTorch names the module, summing to
// the model's count.
TEST(ModelSummary, LayerRowsOfCifarResNet18) {
  Rng rng(0);
  LayerPtr m = make_model("resnet18_cifar", 10, 3, rng);
  const std::vector<LayerRow> rows = layer_rows(*m);
  ASSERT_EQ(rows.size(), 41u);  // 17 convolutions + 3 projections, their BatchNorms, linear
  EXPECT_EQ(rows.front().path, "conv1");
  EXPECT_EQ(rows.front().params, 64 * 3 * 9);
  EXPECT_EQ(rows.back().path, "linear");
  EXPECT_EQ(rows.back().params, 512 * 10 + 10);
  int64_t sum = 0;
  bool shortcut = false;
  for (const LayerRow& r : rows) {
    sum += r.params;
    if (r.path == "layer2.0.shortcut.0") {
      shortcut = true;
      EXPECT_EQ(r.params, 64 * 128);
      EXPECT_EQ(r.type, "Conv2d(64->128, k1, s2, p0)");
    }
  }
  EXPECT_TRUE(shortcut);
  EXPECT_EQ(sum, 11173962);
}

TEST(ModelSummary, LayerTableEndsWithTheTotal) {
  const std::string table = arch_summary("resnet20", 10, 3);
  std::istringstream lines(table);
  std::string first, head, line;
  std::vector<std::string> tail(3);
  std::getline(lines, first);
  std::getline(lines, head);
  EXPECT_EQ(first, "resnet20: 10 classes, 3 input channels, 32x32 input");
  EXPECT_EQ(head.rfind("layer", 0), 0u) << table;
  EXPECT_NE(head.find("  output  "), std::string::npos) << table;
  EXPECT_NE(head.find("mult-adds"), std::string::npos) << table;
  while (std::getline(lines, line)) {
    tail.erase(tail.begin());
    tail.push_back(line);
  }
  EXPECT_EQ(tail[0].rfind("total ", 0), 0u) << table;
  EXPECT_NE(tail[0].find(" 269,722  40,552,426"), std::string::npos) << table;
  // Two option A shortcuts, 19 ReLUs, the pooling and the flatten have no parameters.
  EXPECT_EQ(tail[1],
            "23 layers without parameters not listed (ReLU, ShortcutPadA, GlobalAvgPool2d, "
            "Flatten)");
  EXPECT_EQ(tail[2],
            "output shapes and multiply-adds for an input of [1, 3, 32, 32] (counted as "
            "torchinfo does: parameter-free layers 0)");
}

// Multiply-adds per 32x32 image by hand, as torchinfo counts them: each convolution's
// C_out (C_in / groups) kh kw H_out W_out, each BatchNorm's 2C, the classifier's
// in x out + out.
TEST(ModelSummary, MultiplyAddsOfResNet20ByHand) {
  Rng rng(0);
  LayerPtr m = make_model("resnet20", 10, 3, rng);
  const std::vector<LayerRow> rows = layer_rows(*m, {1, 3, 32, 32});
  ASSERT_EQ(rows.size(), 19u + 19u + 1u);  // convolutions, BatchNorms, linear
  EXPECT_EQ(rows.front().output, Shape({1, 16, 32, 32}));
  EXPECT_EQ(rows.front().macs, 16 * 3 * 9 * 32 * 32);
  EXPECT_EQ(rows.back().output, Shape({1, 10}));
  EXPECT_EQ(rows.back().macs, 64 * 10 + 10);
  int64_t conv = 0, bn = 0;
  for (const LayerRow& r : rows) {
    if (r.type.rfind("Conv2d", 0) == 0) conv += r.macs;
    if (r.type.rfind("BatchNorm2d", 0) == 0) bn += r.macs;
  }
  // The stem; 6 convolutions 16->16 at 32x32; per later stage a strided one (C -> 2C at
  // half the side) and 5 at 2C.
  const int64_t stem = 16 * 3 * 9 * 1024, stage1 = 6 * (16 * 16 * 9 * 1024);
  const int64_t stage2 = 32 * 16 * 9 * 256 + 5 * (32 * 32 * 9 * 256);
  const int64_t stage3 = 64 * 32 * 9 * 64 + 5 * (64 * 64 * 9 * 64);
  EXPECT_EQ(conv, stem + stage1 + stage2 + stage3);
  EXPECT_EQ(conv, 40550400);
  EXPECT_EQ(bn, 2 * (7 * 16 + 6 * 32 + 6 * 64));
}

TEST(ModelSummary, MultiplyAddsOfCifarResNet18ByHand) {
  Rng rng(0);
  LayerPtr m = make_model("resnet18_cifar", 10, 3, rng);
  int64_t total = 0;
  for (const LayerRow& r : layer_rows(*m, {1, 3, 32, 32})) total += r.macs;
  // Per stage at side S with C channels: 4 convolutions C x C x 9 at S x S, except the
  // first of stages 2-4 (C/2 -> C, stride 2) and its 1x1 projection C/2 -> C.
  const int64_t stem = 64 * 3 * 9 * 1024, layer1 = 4 * (64 * 64 * 9 * 1024);
  auto stage = [](int64_t c, int64_t side) {
    const int64_t hw = side * side;
    return c * (c / 2) * 9 * hw + 3 * (c * c * 9 * hw) + c * (c / 2) * hw;
  };
  const int64_t conv = stem + layer1 + stage(128, 16) + stage(256, 8) + stage(512, 4);
  const int64_t bn = 2 * (64 + 4 * 64 + 5 * 128 + 5 * 256 + 5 * 512);
  EXPECT_EQ(total, conv + bn + 512 * 10 + 10);
  EXPECT_EQ(total, 555432330);  // the ~0.56 G multiply-adds quoted for this model
}

TEST(ModelSummary, ATableWithoutInputHasNoShapes) {
  Rng rng(0);
  LayerPtr m = make_model("resnet20", 10, 3, rng);
  const std::string table = layer_table(*m, "t");
  EXPECT_EQ(table.find("mult-adds"), std::string::npos) << table;
  EXPECT_NE(table.find("\ntotal"), std::string::npos) << table;
  for (const LayerRow& r : layer_rows(*m)) EXPECT_EQ(r.output.rank(), 0) << r.path;
}

std::vector<ArchCount> two_rows() {
  return {{{"resnet20", "CIFAR ResNet-20", 32}, 10, 3, 269722, "", 0},
          {{"resnet18_cifar", "CIFAR ResNet-18", 32}, 10, 3, 11173962, "", 0}};
}

TEST(ModelSummary, ListingIsAligned) {
  EXPECT_EQ(models_listing(two_rows()),
            "10 classes, 3 input channels, each architecture at its natural input size "
            "(language models at their paper's vocabulary)\n"
            "arch                params  input  description\n"
            "resnet20           269,722  32x32  CIFAR ResNet-20\n"
            "resnet18_cifar  11,173,962  32x32  CIFAR ResNet-18\n");
}

TEST(ModelSummary, JsonIsOneObjectPerLine) {
  std::istringstream lines(models_json(two_rows()));
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["name"], "resnet18_cifar");
  EXPECT_EQ(rows[1]["params"], 11173962);
  EXPECT_EQ(rows[1]["image_size"], 32);
  EXPECT_EQ(rows[1]["classes"], 10);
  EXPECT_EQ(rows[1]["channels"], 3);
  EXPECT_EQ(rows[1]["description"], "CIFAR ResNet-18");
  EXPECT_EQ(rows[0].size(), 6u);
}

}  // namespace
}  // namespace st::test
