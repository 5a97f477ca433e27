#include "layers/relu.h"

#include "core/kernels/math.h"

namespace st {

Tensor ReLU::forward_cpu(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape());
  const float* in = x.f32();
  float* out = y.f32();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = math::relu(in[i]);
  y_ = y;
  return y;
}

Tensor ReLU::backward_cpu(const Tensor& dy) {
  expect_shape("gradient", y_.shape(), dy.shape());
  Tensor dx = Tensor::empty(dy.shape());
  const float* y = y_.f32();
  const float* g = dy.f32();
  float* out = dx.f32();
  const int64_t n = dy.numel();
#pragma omp parallel for simd if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = math::relu_backward(y[i], g[i]);
  return dx;
}

}  // namespace st
