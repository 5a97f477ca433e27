#include "models/resnet_cifar.h"

#include <memory>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "models/blocks.h"
#include "models/model_init.h"
#include "models/shortcut_pad.h"

namespace st {

namespace {

void check_io(const char* who, int64_t num_classes, int64_t input_channels) {
  ST_CHECK(num_classes > 0 && input_channels > 0, who, ": num_classes and input_channels must be ",
           "positive, got ", num_classes, " and ", input_channels);
}

// conv1 3x3 stride 1 -> bn1 -> relu: the CIFAR stem (no max-pool).
std::unique_ptr<Sequential> cifar_stem(int64_t input_channels, int64_t width, Rng& rng) {
  auto net = std::make_unique<Sequential>();
  auto stem = std::make_unique<Conv2d>(input_channels, width, 3, 1, 1, false, rng);
  stem->set_blocked_output(true);  // into bn1 (core/layout.h)
  net->add("conv1", std::move(stem));
  net->add("bn1", std::make_unique<BatchNorm2d>(width));
  net->add("relu", std::make_unique<ReLU>());
  return net;
}

void add_head(Sequential& net, int64_t features, int64_t num_classes, Rng& rng) {
  net.add("avgpool", std::make_unique<GlobalAvgPool2d>());
  net.add("flatten", std::make_unique<Flatten>());
  net.add("linear", std::make_unique<Linear>(features, num_classes, true, rng));
}

}  // namespace

LayerPtr cifar_resnet(int depth, int64_t num_classes, int64_t input_channels, Rng& rng,
                      CifarShortcut shortcut) {
  check_io("cifar_resnet", num_classes, input_channels);
  ST_CHECK(depth >= 8 && (depth - 2) % 6 == 0, "cifar_resnet: depth must be 6n+2 (20, 32, 44, ",
           "56, 110, ...), got ", depth);
  const int blocks = (depth - 2) / 6;
  auto net = cifar_stem(input_channels, 16, rng);
  int64_t in = 16;
  const int64_t widths[3] = {16, 32, 64};
  for (int stage = 0; stage < 3; ++stage) {
    auto layer = std::make_unique<Sequential>();
    for (int b = 0; b < blocks; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      const int64_t out = widths[stage];
      LayerPtr sc;
      if (stride != 1 || in != out) {
        sc = shortcut == CifarShortcut::A ? std::make_unique<ShortcutPadA>(in, out, stride)
                                          : projection_shortcut(in, out, stride, rng);
      }
      layer->add(basic_block(in, out, stride, std::move(sc), "shortcut", rng));
      in = out;
    }
    net->add("layer" + std::to_string(stage + 1), std::move(layer));
  }
  add_head(*net, in, num_classes, rng);
  kaiming_normal_weights(*net, FanMode::FanIn, /*linear=*/true, rng);
  return net;
}

namespace {

// kuangliu's ResNet(block, num_blocks): four stages of 64/128/256/512 filters (times the
// block's expansion), the first block of stages 2-4 with stride 2, a 1x1 conv + BN
// shortcut named "shortcut" wherever the shape changes.
LayerPtr kuangliu_resnet(const int (&blocks)[4], bool bottleneck, int64_t num_classes,
                         int64_t input_channels, Rng& rng) {
  auto net = cifar_stem(input_channels, 64, rng);
  const int64_t expansion = bottleneck ? kBottleneckExpansion : 1;
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = int64_t{64} << stage, out = width * expansion;
    auto layer = std::make_unique<Sequential>();
    for (int b = 0; b < blocks[stage]; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      LayerPtr sc =
          (stride != 1 || in != out) ? projection_shortcut(in, out, stride, rng) : nullptr;
      layer->add(bottleneck ? bottleneck_block(in, width, stride, std::move(sc), "shortcut", rng)
                            : basic_block(in, width, stride, std::move(sc), "shortcut", rng));
      in = out;
    }
    net->add("layer" + std::to_string(stage + 1), std::move(layer));
  }
  add_head(*net, in, num_classes, rng);
  return net;
}

}  // namespace

LayerPtr cifar_resnet18(int64_t num_classes, int64_t input_channels, Rng& rng) {
  check_io("cifar_resnet18", num_classes, input_channels);
  return kuangliu_resnet({2, 2, 2, 2}, /*bottleneck=*/false, num_classes, input_channels, rng);
}

LayerPtr cifar_resnet152(int64_t num_classes, int64_t input_channels, Rng& rng) {
  check_io("cifar_resnet152", num_classes, input_channels);
  // He et al. 2016, table 1's 152-layer stages.
  return kuangliu_resnet({3, 8, 36, 3}, /*bottleneck=*/true, num_classes, input_channels, rng);
}

}  // namespace st
