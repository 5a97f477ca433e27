// ReLU: y = max(x, 0). Backward uses the cached output (y > 0 iff x > 0).
#pragma once

#include "layers/layer.h"

namespace st {

class ReLU : public Layer {
 public:
  std::string describe() const override { return "ReLU"; }
  bool takes_blocked() const override { return true; }
  bool takes_bf16() const override { return true; }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  Tensor y_;
};

}  // namespace st
