#include "models/small_cnn.h"

#include <memory>

#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"

namespace st {

LayerPtr small_cnn(int64_t num_classes, int64_t input_channels, int64_t image_size, Rng& rng) {
  ST_CHECK(num_classes > 0 && input_channels > 0,
           "small_cnn: num_classes and input_channels must be positive, got ", num_classes, " and ",
           input_channels);
  ST_CHECK(image_size >= 4, "small_cnn: image size must be at least 4, got ", image_size);
  auto net = std::make_unique<Sequential>();
  int64_t in = input_channels, side = image_size;
  const int64_t widths[2] = {32, 64};
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i + 1);
    net->add("conv" + n, std::make_unique<Conv2d>(in, widths[i], 3, 1, 1, false, rng));
    net->add("bn" + n, std::make_unique<BatchNorm2d>(widths[i]));
    net->add("relu" + n, std::make_unique<ReLU>());
    net->add("pool" + n, std::make_unique<MaxPool2d>(2, 2));
    in = widths[i];
    side /= 2;
  }
  net->add("flatten", std::make_unique<Flatten>());
  net->add("fc", std::make_unique<Linear>(in * side * side, num_classes, true, rng));
  return net;
}

}  // namespace st
