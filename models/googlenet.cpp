#include "models/googlenet.h"

#include <memory>

#include "layers/batchnorm2d.h"
#include "layers/concat.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"

namespace st {

namespace {

// Appends conv (k x k, stride 1, same padding, with bias) -> BN -> ReLU to `seq`, numbered
// on from its current size as the reference's nn.Sequential indices.
void conv_bn_relu(Sequential& seq, int64_t in, int64_t out, int k, Rng& rng) {
  seq.add(std::make_unique<Conv2d>(in, out, k, 1, k / 2, /*bias=*/true, rng));
  seq.add(std::make_unique<BatchNorm2d>(out));
  seq.add(std::make_unique<ReLU>());
}

// The widths of one Inception module (table 1 of Szegedy et al. 2015).
struct InceptionWidths {
  int64_t n1x1, n3x3red, n3x3, n5x5red, n5x5, pool_planes;
  int64_t out() const { return n1x1 + n3x3 + n5x5 + pool_planes; }
};

LayerPtr inception(int64_t in, const InceptionWidths& w, Rng& rng) {
  auto b1 = std::make_unique<Sequential>();
  conv_bn_relu(*b1, in, w.n1x1, 1, rng);
  auto b2 = std::make_unique<Sequential>();
  conv_bn_relu(*b2, in, w.n3x3red, 1, rng);
  conv_bn_relu(*b2, w.n3x3red, w.n3x3, 3, rng);
  auto b3 = std::make_unique<Sequential>();  // the 5x5 receptive field as two 3x3
  conv_bn_relu(*b3, in, w.n5x5red, 1, rng);
  conv_bn_relu(*b3, w.n5x5red, w.n5x5, 3, rng);
  conv_bn_relu(*b3, w.n5x5, w.n5x5, 3, rng);
  auto b4 = std::make_unique<Sequential>();
  b4->add(std::make_unique<MaxPool2d>(3, 1, 1));
  conv_bn_relu(*b4, in, w.pool_planes, 1, rng);
  auto join = std::make_unique<Concat>();
  join->add("b1", std::move(b1)).add("b2", std::move(b2)).add("b3", std::move(b3));
  join->add("b4", std::move(b4));
  return join;
}

}  // namespace

LayerPtr cifar_googlenet(int64_t num_classes, int64_t input_channels, Rng& rng) {
  ST_CHECK(num_classes > 0 && input_channels > 0, "cifar_googlenet: num_classes and ",
           "input_channels must be positive, got ", num_classes, " and ", input_channels);
  auto net = std::make_unique<Sequential>();
  auto stem = std::make_unique<Sequential>();
  conv_bn_relu(*stem, input_channels, 192, 3, rng);
  net->add("pre_layers", std::move(stem));
  struct Stage {
    const char* name;
    InceptionWidths widths;
    bool pool_after;
  };
  const Stage stages[] = {
      {"a3", {64, 96, 128, 16, 32, 32}, false},    {"b3", {128, 128, 192, 32, 96, 64}, true},
      {"a4", {192, 96, 208, 16, 48, 64}, false},   {"b4", {160, 112, 224, 24, 64, 64}, false},
      {"c4", {128, 128, 256, 24, 64, 64}, false},  {"d4", {112, 144, 288, 32, 64, 64}, false},
      {"e4", {256, 160, 320, 32, 128, 128}, true}, {"a5", {256, 160, 320, 32, 128, 128}, false},
      {"b5", {384, 192, 384, 48, 128, 128}, false}};
  int64_t in = 192;
  for (const Stage& s : stages) {
    net->add(s.name, inception(in, s.widths, rng));
    in = s.widths.out();
    if (s.pool_after)
      net->add(std::string("maxpool_") + s.name, std::make_unique<MaxPool2d>(3, 2, 1));
  }
  net->add("avgpool", std::make_unique<AvgPool2d>(8, 1));
  net->add("flatten", std::make_unique<Flatten>());
  net->add("linear", std::make_unique<Linear>(in, num_classes, true, rng));
  return net;
}

}  // namespace st
