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

class MaxPool2d : public Layer {
 public:
  MaxPool2d(int kernel, int stride, int pad = 0);
  std::string describe() const override;

 protected:
  Tensor forward_cpu(const Tensor& x) override;
  Tensor backward_cpu(const Tensor& dy) override;
#ifdef SPARSETRAIN_WITH_CUDA
  Tensor forward_cuda(const Tensor& x) override;
  Tensor backward_cuda(const Tensor& dy) override;
#endif

 private:
  PoolGeometry geometry(const Tensor& x) const;
  int kernel_, stride_, pad_;
  PoolGeometry g_{};
  Tensor argmax_;  // int32 flat input offset within the (n, c) plane, per output element
  Tensor x_, y_;   // CUDA (cuDNN) backward needs both
};

class AvgPool2d : public Layer {
 public:
  AvgPool2d(int kernel, int stride, int pad = 0);
  std::string describe() const override;

 protected:
  Tensor forward_cpu(const Tensor& x) override;
  Tensor backward_cpu(const Tensor& dy) override;
#ifdef SPARSETRAIN_WITH_CUDA
  Tensor forward_cuda(const Tensor& x) override;
  Tensor backward_cuda(const Tensor& dy) override;
#endif

 private:
  PoolGeometry geometry(const Tensor& x) const;
  int kernel_, stride_, pad_;
  PoolGeometry g_{};
  Tensor x_, y_;
};

class GlobalAvgPool2d : public Layer {
 public:
  std::string describe() const override { return "GlobalAvgPool2d"; }

 protected:
  Tensor forward_cpu(const Tensor& x) override;
  Tensor backward_cpu(const Tensor& dy) override;
#ifdef SPARSETRAIN_WITH_CUDA
  Tensor forward_cuda(const Tensor& x) override;
  Tensor backward_cuda(const Tensor& dy) override;
#endif

 private:
  Shape in_shape_;
};

}  // namespace st
