// GlobalMaxPool2d: [N, C, H, W] -> [N, C, 1, 1], the maximum of each plane. VGG's last
// 2x2 max-pool sees a 2x2 map on 32x32 input, where it equals this; on 28x28 input
// (Fashion-MNIST) the map is already 1x1 and a 2x2 pool would not fit, so the CIFAR VGG
// ends with this layer to accept both sizes with the same weights and outputs.
#pragma once

#include "layers/layer.h"

namespace st {

class GlobalMaxPool2d : public Layer {
 public:
  std::string describe() const override { return "GlobalMaxPool2d"; }

 protected:
  Tensor forward_cpu(const Tensor& x) override;
  Tensor backward_cpu(const Tensor& dy) override;

 private:
  Shape in_shape_;
  std::vector<int64_t> argmax_;  // per plane: offset of the (first) maximum
};

}  // namespace st
