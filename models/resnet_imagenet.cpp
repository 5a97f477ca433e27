#include "models/resnet_imagenet.h"

#include <memory>
#include <sstream>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "models/blocks.h"
#include "models/model_init.h"

namespace st {

namespace {

struct ResNetSpec {
  int depth;
  bool bottleneck;
  int blocks[4];
};

// He et al. 2016, table 1.
constexpr ResNetSpec kSpecs[] = {
    {18, false, {2, 2, 2, 2}},  {34, false, {3, 4, 6, 3}},  {50, true, {3, 4, 6, 3}},
    {101, true, {3, 4, 23, 3}}, {152, true, {3, 8, 36, 3}},
};

}  // namespace

std::vector<int> imagenet_resnet_depths() {
  std::vector<int> depths;
  for (const ResNetSpec& s : kSpecs) depths.push_back(s.depth);
  return depths;
}

LayerPtr imagenet_resnet(int depth, int64_t num_classes, int64_t input_channels, Rng& rng) {
  const ResNetSpec* spec = nullptr;
  for (const ResNetSpec& s : kSpecs)
    if (s.depth == depth) spec = &s;
  if (spec == nullptr) {
    std::ostringstream valid;
    for (int d : imagenet_resnet_depths()) valid << " " << d;
    ST_THROW("imagenet_resnet: no ResNet-", depth, "; valid depths:", valid.str());
  }
  ST_CHECK(num_classes > 0 && input_channels > 0,
           "imagenet_resnet: num_classes and input_channels must be positive, got ", num_classes,
           " and ", input_channels);

  auto net = std::make_unique<Sequential>();
  auto stem = std::make_unique<Conv2d>(input_channels, 64, 7, 2, 3, false, rng);
  stem->set_blocked_output(true);  // into bn1 (core/layout.h)
  net->add("conv1", std::move(stem));
  net->add("bn1", std::make_unique<BatchNorm2d>(64));
  net->add("relu", std::make_unique<ReLU>());
  net->add("maxpool", std::make_unique<MaxPool2d>(3, 2, 1));
  const int64_t expansion = spec->bottleneck ? kBottleneckExpansion : 1;
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = int64_t{64} << stage;
    const int64_t out = width * expansion;
    auto layer = std::make_unique<Sequential>();
    for (int b = 0; b < spec->blocks[stage]; ++b) {
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      LayerPtr downsample =
          (stride != 1 || in != out) ? projection_shortcut(in, out, stride, rng) : nullptr;
      layer->add(spec->bottleneck
                     ? bottleneck_block(in, width, stride, std::move(downsample), "downsample", rng)
                     : basic_block(in, width, stride, std::move(downsample), "downsample", rng));
      in = out;
    }
    net->add("layer" + std::to_string(stage + 1), std::move(layer));
  }
  net->add("avgpool", std::make_unique<GlobalAvgPool2d>());
  net->add("flatten", std::make_unique<Flatten>());
  net->add("fc", std::make_unique<Linear>(in, num_classes, true, rng));
  kaiming_normal_weights(*net, FanMode::FanOut, /*linear=*/false, rng);
  return net;
}

}  // namespace st
