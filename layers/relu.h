// ReLU: y = max(x, 0). Backward uses the cached output (y > 0 iff x > 0).
#pragma once

#include "layers/layer.h"

namespace st {

class ReLU : public Layer {
 public:
  ~ReLU() override { finish_queued_work(); }  // its queued tasks read its members
  std::string describe() const override { return "ReLU"; }
  bool takes_blocked() const override { return true; }
  bool takes_bf16() const override { return true; }
  std::optional<TensorSpec> output_spec(const Tensor& x) const override { return taken_spec(x); }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  Tensor y_;
};

}  // namespace st
