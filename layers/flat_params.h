// FlatParams: every parameter of a model as a view into one flat value buffer and one
// flat gradient buffer (llm.c's single allocation; DDP's bucket views). The layout is in
// REVERSE registration order, the order gradients become ready during backward, so each
// bucket of the reducer is one contiguous slice and a one-bucket plan is the whole buffer.
#pragma once

#include <vector>

#include "layers/layer.h"

namespace st {

class FlatParams {
 public:
  // Copies the current values into the flat buffer on `device` and rebinds every
  // Param's value and grad to views of it. The model keeps working unchanged.
  FlatParams(Layer& model, Device device);

  Tensor& values() { return values_; }
  Tensor& grads() { return grads_; }
  int64_t numel() const { return values_.numel(); }
  // Parameters in forward (registration) order, with full names.
  const std::vector<Param*>& params() const { return params_; }
  // Element offset of a parameter inside the flat buffers.
  int64_t offset(const Param& p) const { return offsets_[p.index]; }
  void zero_grads() { grads_.zero(); }

 private:
  std::vector<Param*> params_;
  std::vector<int64_t> offsets_;
  Tensor values_, grads_;
};

}  // namespace st
