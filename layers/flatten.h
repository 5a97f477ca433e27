// Flatten: [N, ...] -> [N, prod(...)], a view on both backends.
#pragma once

#include "layers/layer.h"

namespace st {

class Flatten : public Layer {
 public:
  std::string describe() const override { return "Flatten"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;

 protected:
  Tensor forward_cpu(const Tensor& x) override { return forward(x); }
  Tensor backward_cpu(const Tensor& dy) override { return backward(dy); }

 private:
  Shape in_shape_;
};

}  // namespace st
