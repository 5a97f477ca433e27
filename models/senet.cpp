#include "models/senet.h"

#include <functional>
#include <memory>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "layers/squeeze_excite.h"

namespace st {

namespace {

constexpr int64_t kReduction = 16;  // Hu et al. 2018, sec. 6.1: r = 16

LayerPtr conv(int64_t in, int64_t out, int k, int stride, Rng& rng) {
  return std::make_unique<Conv2d>(in, out, k, stride, k / 2, /*bias=*/false, rng);
}

LayerPtr squeeze_excite(int64_t planes, Rng& rng) {
  return std::make_unique<SqueezeExcite>(planes, planes / kReduction, rng);
}

// Pre-activation block with SE. Where the shape changes, the shortcut reads the
// pre-activated input: bn1 and its ReLU sit before the residual, which holds the rest.
LayerPtr preact_se_block(int64_t in, int64_t planes, int stride, Rng& rng) {
  const bool project = stride != 1 || in != planes;
  auto block = std::make_unique<Sequential>();
  auto main = std::make_unique<Sequential>();
  Sequential& pre = project ? *block : *main;
  pre.add("bn1", std::make_unique<BatchNorm2d>(in));
  pre.add("relu1", std::make_unique<ReLU>());
  main->add("conv1", conv(in, planes, 3, stride, rng));
  main->add("bn2", std::make_unique<BatchNorm2d>(planes));
  main->add("relu2", std::make_unique<ReLU>());
  main->add("conv2", conv(planes, planes, 3, 1, rng));
  main->add("", squeeze_excite(planes, rng));
  LayerPtr shortcut;
  if (project) {
    auto s = std::make_unique<Sequential>();
    s->add("0", conv(in, planes, 1, stride, rng));
    shortcut = std::move(s);
  }
  block->add("", std::make_unique<Residual>(std::move(main), std::move(shortcut), "shortcut"));
  return block;
}

// resnet18_cifar's BasicBlock with SE on the residual branch before the add.
LayerPtr basic_se_block(int64_t in, int64_t planes, int stride, Rng& rng) {
  auto main = std::make_unique<Sequential>();
  main->add("conv1", conv(in, planes, 3, stride, rng));
  main->add("bn1", std::make_unique<BatchNorm2d>(planes));
  main->add("relu", std::make_unique<ReLU>());
  main->add("conv2", conv(planes, planes, 3, 1, rng));
  main->add("bn2", std::make_unique<BatchNorm2d>(planes));
  main->add("", squeeze_excite(planes, rng));
  LayerPtr shortcut;
  if (stride != 1 || in != planes) {
    auto s = std::make_unique<Sequential>();
    s->add("0", conv(in, planes, 1, stride, rng));
    s->add("1", std::make_unique<BatchNorm2d>(planes));
    shortcut = std::move(s);
  }
  auto block = std::make_unique<Sequential>();
  block->add("", std::make_unique<Residual>(std::move(main), std::move(shortcut), "shortcut"));
  block->add("relu", std::make_unique<ReLU>());
  return block;
}

using BlockMaker = std::function<LayerPtr(int64_t in, int64_t planes, int stride, Rng& rng)>;

// Stem, four stages of two blocks, `pool`, flatten, linear.
LayerPtr se_network(const char* who, int64_t num_classes, int64_t input_channels,
                    const BlockMaker& block, LayerPtr pool, Rng& rng) {
  ST_CHECK(num_classes > 0 && input_channels > 0, who, ": num_classes and input_channels must ",
           "be positive, got ", num_classes, " and ", input_channels);
  auto net = std::make_unique<Sequential>();
  net->add("conv1", conv(input_channels, 64, 3, 1, rng));
  net->add("bn1", std::make_unique<BatchNorm2d>(64));
  net->add("relu", std::make_unique<ReLU>());
  int64_t in = 64;
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    auto layer = std::make_unique<Sequential>();
    for (int b = 0; b < 2; ++b) {
      layer->add(block(in, widths[stage], (stage > 0 && b == 0) ? 2 : 1, rng));
      in = widths[stage];
    }
    net->add("layer" + std::to_string(stage + 1), std::move(layer));
  }
  net->add("avgpool", std::move(pool));
  net->add("flatten", std::make_unique<Flatten>());
  net->add("linear", std::make_unique<Linear>(in, num_classes, true, rng));
  return net;
}

}  // namespace

LayerPtr cifar_senet18(int64_t num_classes, int64_t input_channels, Rng& rng) {
  return se_network("cifar_senet18", num_classes, input_channels, preact_se_block,
                    std::make_unique<AvgPool2d>(4, 4), rng);
}

LayerPtr cifar_se_resnet18(int64_t num_classes, int64_t input_channels, Rng& rng) {
  return se_network("cifar_se_resnet18", num_classes, input_channels, basic_se_block,
                    std::make_unique<GlobalAvgPool2d>(), rng);
}

}  // namespace st
