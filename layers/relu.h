// ReLU: y = max(x, 0). Backward uses the cached output (y > 0 iff x > 0).
#pragma once

#include "layers/layer.h"

namespace st {

class ReLU : public Layer {
 public:
  std::string describe() const override { return "ReLU"; }

 protected:
  Tensor forward_cpu(const Tensor& x) override;
  Tensor backward_cpu(const Tensor& dy) override;
#ifdef SPARSETRAIN_WITH_CUDA
  Tensor forward_cuda(const Tensor& x) override;
  Tensor backward_cuda(const Tensor& dy) override;
#endif

 private:
  Tensor y_;
};

}  // namespace st
