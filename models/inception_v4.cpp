#include "models/inception_v4.h"

#include <memory>
#include <string>
#include <utility>

#include "layers/batchnorm2d.h"
#include "layers/concat.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"

namespace st {

namespace {

// The reference's BasicConv2d: convolution without bias -> BatchNorm -> ReLU.
LayerPtr conv_bn(int64_t in, int64_t out, Hw kernel, Hw pad, Rng& rng, int stride = 1) {
  auto s = std::make_unique<Sequential>();
  s->add("conv", std::make_unique<Conv2d>(in, out, kernel, Hw{stride, stride}, pad,
                                          /*bias=*/false, rng));
  s->add("bn", std::make_unique<BatchNorm2d>(out));
  s->add("relu", std::make_unique<ReLU>());
  return s;
}

LayerPtr conv_bn(int64_t in, int64_t out, int kernel, int pad, Rng& rng, int stride = 1) {
  return conv_bn(in, out, Hw{kernel, kernel}, Hw{pad, pad}, rng, stride);
}

// An nn.Sequential of the given layers, numbered from 0.
template <typename... Layers>
std::unique_ptr<Sequential> chain(Layers&&... layers) {
  auto s = std::make_unique<Sequential>();
  (s->add(std::forward<Layers>(layers)), ...);
  return s;
}

// `first`, then two branches over its output joined on channels: InceptionC's 1x3 and
// 3x1 pair. `first` keeps its own name; the pair sits beside it under the block.
LayerPtr then_pair(const std::string& first_name, LayerPtr first, const std::string& a_name,
                   LayerPtr a, const std::string& b_name, LayerPtr b) {
  auto pair = std::make_unique<Concat>();
  pair->add(a_name, std::move(a)).add(b_name, std::move(b));
  auto s = std::make_unique<Sequential>();
  s->add(first_name, std::move(first));
  s->add("", std::move(pair));
  return s;
}

LayerPtr avg_then_conv(int64_t in, int64_t out, Rng& rng) {
  return chain(std::make_unique<AvgPool2d>(3, 1, 1), conv_bn(in, out, 1, 0, rng));
}

// Fig. 3 for 32x32 input: 3 -> 32 (3x3, no padding: 30 pixels) -> 32 -> 64; [3x3 conv 96
// | 3x3 max-pool] = 160; [1x1 64, 7x1, 1x7, 3x3 96 | 1x1 64, 3x3 96] = 192; [3x3 max-pool
// | 3x3 conv 192] = 384. Everything after the first convolution keeps 30x30.
LayerPtr stem(int64_t input_channels, Rng& rng) {
  auto s = std::make_unique<Sequential>();
  s->add("conv1", chain(conv_bn(input_channels, 32, 3, 0, rng), conv_bn(32, 32, 3, 1, rng),
                        conv_bn(32, 64, 3, 1, rng)));
  auto first = std::make_unique<Concat>();
  first->add("branch3x3_conv", conv_bn(64, 96, 3, 1, rng));
  first->add("branch3x3_pool", std::make_unique<MaxPool2d>(3, 1, 1));
  s->add("", std::move(first));
  auto second = std::make_unique<Concat>();
  second->add("branch7x7a",
              chain(conv_bn(160, 64, 1, 0, rng), conv_bn(64, 64, {7, 1}, {3, 0}, rng),
                    conv_bn(64, 64, {1, 7}, {0, 3}, rng), conv_bn(64, 96, 3, 1, rng)));
  second->add("branch7x7b", chain(conv_bn(160, 64, 1, 0, rng), conv_bn(64, 96, 3, 1, rng)));
  s->add("", std::move(second));
  auto third = std::make_unique<Concat>();
  third->add("branchpoola", std::make_unique<MaxPool2d>(3, 1, 1));
  third->add("branchpoolb", conv_bn(192, 192, 3, 1, rng));
  s->add("", std::move(third));
  return s;
}

// Fig. 4: 96 + 96 + 96 + 96 = 384 channels.
LayerPtr inception_a(int64_t in, Rng& rng) {
  auto j = std::make_unique<Concat>();
  j->add("branch3x3stack",
         chain(conv_bn(in, 64, 1, 0, rng), conv_bn(64, 96, 3, 1, rng), conv_bn(96, 96, 3, 1, rng)));
  j->add("branch3x3", chain(conv_bn(in, 64, 1, 0, rng), conv_bn(64, 96, 3, 1, rng)));
  j->add("branch1x1", conv_bn(in, 96, 1, 0, rng));
  j->add("branchpool", avg_then_conv(in, 96, rng));
  return j;
}

// Fig. 7 with table 1's Inception-v4 widths k, l, m, n: m + n + in channels, stride 2
// without padding.
LayerPtr reduction_a(int64_t in, int64_t k, int64_t l, int64_t m, int64_t n, Rng& rng) {
  auto j = std::make_unique<Concat>();
  j->add("branch3x3stack", chain(conv_bn(in, k, 1, 0, rng), conv_bn(k, l, 3, 1, rng),
                                 conv_bn(l, m, 3, 0, rng, /*stride=*/2)));
  j->add("branch3x3", conv_bn(in, n, 3, 0, rng, /*stride=*/2));
  j->add("branchpool", std::make_unique<MaxPool2d>(3, 2, 0));
  return j;
}

// Fig. 5: 384 + 256 + 256 + 128 = 1024 channels.
LayerPtr inception_b(int64_t in, Rng& rng) {
  auto j = std::make_unique<Concat>();
  j->add("branch1x1", conv_bn(in, 384, 1, 0, rng));
  j->add("branch7x7", chain(conv_bn(in, 192, 1, 0, rng), conv_bn(192, 224, {1, 7}, {0, 3}, rng),
                            conv_bn(224, 256, {7, 1}, {3, 0}, rng)));
  j->add("branch7x7stack",
         chain(conv_bn(in, 192, 1, 0, rng), conv_bn(192, 192, {1, 7}, {0, 3}, rng),
               conv_bn(192, 224, {7, 1}, {3, 0}, rng), conv_bn(224, 224, {1, 7}, {0, 3}, rng),
               conv_bn(224, 256, {7, 1}, {3, 0}, rng)));
  j->add("branchpool", avg_then_conv(in, 128, rng));
  return j;
}

// Fig. 8: 192 + 320 + in channels, stride 2 with padding 1 (14 -> 7 pixels).
LayerPtr reduction_b(int64_t in, Rng& rng) {
  auto j = std::make_unique<Concat>();
  j->add("branch3x3",
         chain(conv_bn(in, 192, 1, 0, rng), conv_bn(192, 192, 3, 1, rng, /*stride=*/2)));
  j->add("branch7x7",
         chain(conv_bn(in, 256, 1, 0, rng), conv_bn(256, 256, {1, 7}, {0, 3}, rng),
               conv_bn(256, 320, {7, 1}, {3, 0}, rng), conv_bn(320, 320, 3, 1, rng, /*stride=*/2)));
  j->add("branchpool", std::make_unique<MaxPool2d>(3, 2, 1));
  return j;
}

// Fig. 6: 256 + (256 + 256) + (256 + 256) + 256 = 1536 channels; the two pairs split a
// 1x1 (and a 1x1 -> 1x3 -> 3x1 stack) into a 3x1 and a 1x3 branch.
LayerPtr inception_c(int64_t in, Rng& rng) {
  auto j = std::make_unique<Concat>();
  j->add("branch1x1", conv_bn(in, 256, 1, 0, rng));
  j->add("", then_pair("branch3x3", conv_bn(in, 384, 1, 0, rng), "branch3x3a",
                       conv_bn(384, 256, {3, 1}, {1, 0}, rng), "branch3x3b",
                       conv_bn(384, 256, {1, 3}, {0, 1}, rng)));
  j->add("", then_pair("branch3x3stack",
                       chain(conv_bn(in, 384, 1, 0, rng), conv_bn(384, 448, {1, 3}, {0, 1}, rng),
                             conv_bn(448, 512, {3, 1}, {1, 0}, rng)),
                       "branch3x3stacka", conv_bn(512, 256, {1, 3}, {0, 1}, rng), "branch3x3stackb",
                       conv_bn(512, 256, {3, 1}, {1, 0}, rng)));
  j->add("branchpool", avg_then_conv(in, 256, rng));
  return j;
}

// `count` blocks named as the reference's _generate_inception_module ("InceptionA_0").
template <typename Make>
LayerPtr stage(const std::string& block, int count, Make make) {
  auto s = std::make_unique<Sequential>();
  for (int i = 0; i < count; ++i) s->add(block + "_" + std::to_string(i), make());
  return s;
}

}  // namespace

LayerPtr inception_v4(int64_t num_classes, int64_t input_channels, Rng& rng) {
  ST_CHECK(num_classes > 0 && input_channels > 0, "inception_v4: num_classes and ",
           "input_channels must be positive, got ", num_classes, " and ", input_channels);
  auto net = std::make_unique<Sequential>();
  net->add("stem", stem(input_channels, rng));
  net->add("inception_a", stage("InceptionA", 4, [&] { return inception_a(384, rng); }));
  net->add("reduction_a", reduction_a(384, 192, 224, 256, 384, rng));
  net->add("inception_b", stage("InceptionB", 7, [&] { return inception_b(1024, rng); }));
  net->add("reduction_b", reduction_b(1024, rng));
  net->add("inception_c", stage("InceptionC", 3, [&] { return inception_c(1536, rng); }));
  // The reference's AvgPool2d(7) over the 7x7 map of a 32x32 input.
  net->add("avgpool", std::make_unique<AvgPool2d>(7, 7));
  // Keep probability 0.8 (Szegedy et al. 2016, fig. 9); its own Philox key.
  net->add("dropout", std::make_unique<Dropout>(0.2f, rng.seed() * 0x9E3779B97F4A7C15ull + 1));
  net->add("flatten", std::make_unique<Flatten>());
  net->add("linear", std::make_unique<Linear>(1536, num_classes, true, rng));
  return net;
}

}  // namespace st
