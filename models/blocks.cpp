#include "models/blocks.h"

#include <memory>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/pointwise.h"
#include "layers/sequential.h"

namespace st {

namespace {

// Every convolution of a block feeds a BatchNorm, so it may hand over blocked activations.
LayerPtr conv(int64_t in, int64_t out, int k, int stride, Rng& rng) {
  auto c = std::make_unique<Conv2d>(in, out, k, stride, k / 2, /*bias=*/false, rng);
  c->set_blocked_output(true);
  return c;
}

LayerPtr bn(int64_t c) {
  return std::make_unique<BatchNorm2d>(c);
}

// Sequential{ "" : Residual(main, shortcut), "relu" : ReLU }: the residual is transparent
// so its children's names sit directly under the block's prefix.
LayerPtr residual_then_relu(std::unique_ptr<Sequential> main, LayerPtr shortcut,
                            const std::string& shortcut_name) {
  auto block = std::make_unique<Sequential>();
  block->add("", std::make_unique<Residual>(std::move(main), std::move(shortcut), shortcut_name));
  block->add("relu", std::make_unique<ReLU>());
  return block;
}

}  // namespace

LayerPtr basic_block(int64_t in_channels, int64_t out_channels, int stride, LayerPtr shortcut,
                     const std::string& shortcut_name, Rng& rng) {
  auto main = std::make_unique<Sequential>();
  main->add("conv1", conv(in_channels, out_channels, 3, stride, rng));
  main->add("bn1", bn(out_channels));
  main->add("relu", std::make_unique<ReLU>());
  main->add("conv2", conv(out_channels, out_channels, 3, 1, rng));
  main->add("bn2", bn(out_channels));
  return residual_then_relu(std::move(main), std::move(shortcut), shortcut_name);
}

LayerPtr bottleneck_block(int64_t in_channels, int64_t width, int stride, LayerPtr shortcut,
                          const std::string& shortcut_name, Rng& rng) {
  const int64_t out_channels = width * kBottleneckExpansion;
  auto main = std::make_unique<Sequential>();
  main->add("conv1", conv(in_channels, width, 1, 1, rng));
  main->add("bn1", bn(width));
  main->add("relu1", std::make_unique<ReLU>());
  main->add("conv2", conv(width, width, 3, stride, rng));
  main->add("bn2", bn(width));
  main->add("relu2", std::make_unique<ReLU>());
  main->add("conv3", conv(width, out_channels, 1, 1, rng));
  main->add("bn3", bn(out_channels));
  return residual_then_relu(std::move(main), std::move(shortcut), shortcut_name);
}

LayerPtr projection_shortcut(int64_t in_channels, int64_t out_channels, int stride, Rng& rng) {
  auto s = std::make_unique<Sequential>();
  s->add("0", conv(in_channels, out_channels, 1, stride, rng));
  s->add("1", bn(out_channels));
  return s;
}

}  // namespace st
