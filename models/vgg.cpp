#include "models/vgg.h"

#include <memory>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "models/global_max_pool.h"

namespace st {

namespace {

constexpr int kPool = 0;  // 'M' in the reference configurations

std::vector<int> vgg_config(int depth) {
  switch (depth) {
    case 11:
      return {64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool};
    case 13:
      return {64, 64, kPool, 128, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool};
    case 16:
      return {64,    64,  kPool, 128, 128,   kPool, 256, 256, 256,
              kPool, 512, 512,   512, kPool, 512,   512, 512, kPool};
    case 19:
      return {64,  64,  kPool, 128, 128,   kPool, 256, 256, 256, 256,  kPool,
              512, 512, 512,   512, kPool, 512,   512, 512, 512, kPool};
    default:
      ST_THROW("vgg_cifar: no VGG-", depth, "; valid depths: 11 13 16 19");
  }
}

}  // namespace

LayerPtr vgg_cifar(int depth, int64_t num_classes, int64_t input_channels, Rng& rng) {
  const std::vector<int> cfg = vgg_config(depth);
  ST_CHECK(num_classes > 0 && input_channels > 0,
           "vgg_cifar: num_classes and input_channels must be positive, got ", num_classes, " and ",
           input_channels);
  auto features = std::make_unique<Sequential>();
  int64_t in = input_channels;
  for (size_t i = 0; i < cfg.size(); ++i) {
    if (cfg[i] == kPool) {
      const bool last = i + 1 == cfg.size();
      if (last) {
        features->add(std::make_unique<GlobalMaxPool2d>());
      } else {
        features->add(std::make_unique<MaxPool2d>(2, 2));
      }
      continue;
    }
    features->add(std::make_unique<Conv2d>(in, cfg[i], 3, 1, 1, true, rng));
    features->add(std::make_unique<BatchNorm2d>(cfg[i]));
    features->add(std::make_unique<ReLU>());
    in = cfg[i];
  }
  auto net = std::make_unique<Sequential>();
  net->add("features", std::move(features));
  net->add("flatten", std::make_unique<Flatten>());
  net->add("classifier", std::make_unique<Linear>(in, num_classes, true, rng));
  return net;
}

}  // namespace st
