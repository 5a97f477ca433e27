#include "layers/flatten.h"

namespace st {

Tensor Flatten::forward(const Tensor& x) {
  ST_CHECK(x.rank() >= 1, describe(), ": expected at least a batch dimension, got shape ",
           x.shape());
  in_shape_ = x.shape();
  const int64_t n = x.dim(0);
  return x.reshape(Shape{n, n == 0 ? 0 : x.numel() / n});
}

Tensor Flatten::backward(const Tensor& dy) {
  ST_CHECK(dy.numel() == in_shape_.numel(), describe(), ": gradient shape ", dy.shape(),
           " does not match input shape ", in_shape_);
  return dy.reshape(in_shape_);
}

}  // namespace st
