// Binary cross-entropy on logits (PyTorch's BCEWithLogitsLoss, mean over the batch): the
// loss NCF trains with (He et al. 2017, eq. 7). Logits [N] or [N, 1] on any device,
// labels float [N] in [0, 1] on the host. The logits are one float per example, so they
// are read on the host (one small copy from a device) and the gradient is copied back;
// no kernel of its own is needed on CUDA or the emulated device.
#pragma once

#include "core/tensor.h"

namespace st {

class BceWithLogits {
 public:
  // Returns the mean loss; keeps sigmoid(z) - y for backward().
  float forward(const Tensor& logits, const Tensor& labels);
  // dL/dlogits = (sigmoid(z) - y) / N, on the logits' device and in their shape.
  Tensor backward() const;
  // Rows where (z > 0) agrees with (y > 0.5) in the last forward().
  int64_t correct() const { return correct_; }

 private:
  Tensor residual_;  // sigmoid(z) - y on the host
  Shape shape_;
  Device device_ = Device::cpu();
  int64_t correct_ = 0;
};

}  // namespace st
