// Softmax cross-entropy over logits [N, K] and int32 labels [N], mean over the batch.
// Numerically stable: log-softmax subtracts the row maximum before exponentiating.
#pragma once

#include "core/tensor.h"

namespace st {

class SoftmaxCrossEntropy {
 public:
  // Returns the mean loss; caches the probabilities for backward().
  float forward(const Tensor& logits, const Tensor& labels);
  // dL/dlogits = (softmax - onehot) / N, scaled by `scale` (1 by default).
  Tensor backward(float scale = 1.0f);
  // Number of rows whose arg-max equals the label in the last forward().
  int64_t correct() const { return correct_; }

 private:
  // The CPU code, which on the emulated device runs as a task on its stream.
  float forward_host(const Tensor& logits, const Tensor& labels);
  Tensor backward_host(float scale);
#ifdef SPARSETRAIN_WITH_CUDA
  float forward_cuda(const Tensor& logits, const Tensor& labels);
  Tensor backward_cuda(float scale);
#endif
  Tensor probs_;
  Tensor labels_;
  int64_t correct_ = 0;
};

}  // namespace st
