// Pooling over NCHW: MaxPool2d and AvgPool2d (kernel, stride, zero padding; average
// counts padded zeros, PyTorch's default count_include_pad=True) and global average
// pooling to [N, C, 1, 1].
#pragma once

#include "layers/layer.h"

namespace st {

struct PoolGeometry {
  int64_t n, c, h, w, oh, ow;
  int kernel, stride, pad;
};

// What MaxPool2d and AvgPool2d share: the window (kernel, stride, zero padding, checked
// at construction), the output geometry of an input, and the tensors backward needs.
class Pool2d : public Layer {
 public:
  std::string describe() const override;
  std::optional<TensorSpec> output_spec(const Tensor& x) const override;

 protected:
  Pool2d(const char* type, int kernel, int stride, int pad);
  // Geometry of x (rank 4, at least one window); errors name the layer and the shape.
  PoolGeometry geometry(const Tensor& x) const;
  const char* type_;
  int kernel_, stride_, pad_;
  PoolGeometry g_{};
  Tensor x_, y_;  // CUDA (cuDNN) backward needs both
};

class MaxPool2d : public Pool2d {
 public:
  ~MaxPool2d() override { finish_queued_work(); }  // its queued tasks read its members
  MaxPool2d(int kernel, int stride, int pad = 0) : Pool2d("MaxPool2d", kernel, stride, pad) {}

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  Tensor argmax_;  // int32 flat input offset within the (n, c) plane, per output element
};

// Average counts padded zeros (PyTorch's default count_include_pad=True).
class AvgPool2d : public Pool2d {
 public:
  ~AvgPool2d() override { finish_queued_work(); }  // its queued tasks read its members
  AvgPool2d(int kernel, int stride, int pad = 0) : Pool2d("AvgPool2d", kernel, stride, pad) {}

 protected:
  ST_LAYER_CPU_AND_CUDA
};

class GlobalAvgPool2d : public Layer {
 public:
  ~GlobalAvgPool2d() override { finish_queued_work(); }  // its queued tasks read its members
  std::string describe() const override { return "GlobalAvgPool2d"; }
  // Reads the 16-channel blocked layout (core/layout.h) too: the [N, C, 1, 1] output is
  // plain, and dx comes back in the layout x came in.
  bool takes_blocked() const override { return true; }
  std::optional<TensorSpec> output_spec(const Tensor& x) const override {
    if (x.rank() != 4) return std::nullopt;  // forward's own check names the shape
    return TensorSpec{Shape{x.dim(0), x.dim(1), 1, 1}};
  }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  Shape in_shape_;
  Layout in_layout_ = Layout::Plain;
};

}  // namespace st
