// ShortcutPadA: the parameter-free "option A" shortcut of He et al. 2016 (sec. 3.3 and
// 4.2): where a stage halves the resolution and widens the channels, the identity
// shortcut takes every stride-th pixel and pads the new channels with zeros. Like the
// reference CIFAR code (akamaster/pytorch_resnet_cifar10) the input channels sit in the
// middle: (out - in) / 2 zero channels in front, the rest behind.
#pragma once

#include "core/host_device.h"
#include "layers/layer.h"

namespace st {

namespace math {
// Input offset within an [C_in, H, W] image feeding output element (c, i, j) of an
// [C_out, OH, OW] image, or -1 for a zero-padded channel. One formula for both backends.
ST_HD int64_t shortcut_pad_source(int64_t c, int64_t i, int64_t j, int64_t front, int64_t cin,
                                  int64_t h, int64_t w, int stride) {
  const int64_t ci = c - front;
  if (ci < 0 || ci >= cin) return -1;
  return (ci * h + i * stride) * w + j * stride;
}
}  // namespace math

class ShortcutPadA : public Layer {
 public:
  ~ShortcutPadA() override { finish_queued_work(); }  // its queued tasks read its members
  ShortcutPadA(int64_t in_channels, int64_t out_channels, int stride);
  std::string describe() const override;
  // Output spatial extent for an input extent: ceil(h / stride), like a stride-s 3x3 conv
  // with padding 1, so the residual add lines up for odd sizes (28 -> 14 -> 7 -> 4).
  int64_t out_extent(int64_t h) const { return (h + stride_ - 1) / stride_; }
  // A selection, so the 16-channel blocked layout (core/layout.h) costs nothing extra:
  // the output keeps the input's layout.
  bool takes_blocked() const override { return cin_ % 16 == 0 && cout_ % 16 == 0; }
  // And bfloat16 activations, for the same reason.
  bool takes_bf16() const override { return true; }
  std::optional<TensorSpec> output_spec(const Tensor& x) const override;

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  void check_input(const Tensor& x) const;
  // Where output element (img, c, i, j) comes from in the input, as an offset into the
  // input's memory in `layout`, or -1 for a padded channel.
  int64_t source(Layout layout, int64_t img, int64_t c, int64_t i, int64_t j) const;
  int64_t cin_, cout_, front_;
  int stride_;
  Shape in_shape_;
  Layout in_layout_ = Layout::Plain;
  DType in_dtype_ = DType::F32;
};

}  // namespace st
