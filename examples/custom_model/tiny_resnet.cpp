// A model added from outside the sparsetrain tree in one file: a small CIFAR-style ResNet
// (one basic block per stage, widths 8-16-32, projection shortcuts), registered as
// --arch tiny_resnet next to the built-in architectures.
#include <memory>

#include <sparsetrain/layers/batchnorm2d.h>
#include <sparsetrain/layers/conv2d.h>
#include <sparsetrain/layers/flatten.h>
#include <sparsetrain/layers/linear.h>
#include <sparsetrain/layers/pointwise.h>
#include <sparsetrain/layers/pooling.h>
#include <sparsetrain/layers/sequential.h>
#include <sparsetrain/models/blocks.h>
#include <sparsetrain/models/model_init.h>
#include <sparsetrain/models/registry.h>

namespace {

st::LayerPtr tiny_resnet(int64_t num_classes, int64_t input_channels, int64_t /*image_size*/,
                         st::Rng& rng) {
  auto net = std::make_unique<st::Sequential>();
  net->add("conv1", std::make_unique<st::Conv2d>(input_channels, 8, 3, 1, 1, false, rng));
  net->add("bn1", std::make_unique<st::BatchNorm2d>(8));
  net->add("relu", std::make_unique<st::ReLU>());
  int64_t in = 8;
  const int64_t widths[3] = {8, 16, 32};
  for (int stage = 0; stage < 3; ++stage) {
    const int stride = stage == 0 ? 1 : 2;
    const int64_t out = widths[stage];
    st::LayerPtr shortcut;
    if (stride != 1 || in != out) shortcut = st::projection_shortcut(in, out, stride, rng);
    net->add("layer" + std::to_string(stage + 1),
             st::basic_block(in, out, stride, std::move(shortcut), "downsample", rng));
    in = out;
  }
  net->add("avgpool", std::make_unique<st::GlobalAvgPool2d>());
  net->add("flatten", std::make_unique<st::Flatten>());
  net->add("fc", std::make_unique<st::Linear>(in, num_classes, true, rng));
  st::kaiming_normal_weights(*net, st::FanMode::FanOut, /*linear=*/false, rng);
  return net;
}

// The whole registration: --arch tiny_resnet now builds this model.
const st::ModelRegistrar kTinyResnet({"tiny_resnet", "ResNet-8-like, widths 8/16/32", 32},
                                     tiny_resnet);

}  // namespace
