// GlobalMaxPool2d: [N, C, H, W] -> [N, C, 1, 1], the maximum of each plane. VGG's last
// 2x2 max-pool sees a 2x2 map on 32x32 input, where it equals this; on 28x28 input
// (Fashion-MNIST) the map is already 1x1 and a 2x2 pool would not fit, so the CIFAR VGG
// ends with this layer to accept both sizes with the same weights and outputs.
#pragma once

#include "core/host_device.h"
#include "layers/layer.h"

namespace st {

namespace math {
// Offset of the first maximum of a plane of n values (both backends use this loop).
ST_HD int32_t plane_argmax(const float* x, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = static_cast<int32_t>(i);
  return best;
}
}  // namespace math

class GlobalMaxPool2d : public Layer {
 public:
  ~GlobalMaxPool2d() override { finish_queued_work(); }  // its queued tasks read its members
  std::string describe() const override { return "GlobalMaxPool2d"; }
  std::optional<TensorSpec> output_spec(const Tensor& x) const override {
    if (x.rank() != 4) return std::nullopt;  // forward's own check names the shape
    return TensorSpec{Shape{x.dim(0), x.dim(1), 1, 1}};
  }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  void check_input(const Tensor& x);
  Shape in_shape_;
  Tensor argmax_;  // int32 per plane: offset of the first maximum, on the input's device
};

}  // namespace st
