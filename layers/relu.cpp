#include "layers/relu.h"

#include "core/kernels/math.h"
#include "core/layout.h"

namespace st {

// Elementwise, so any layout: the output keeps the input's.
Tensor ReLU::forward_cpu(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape()).with_layout(x.layout());
  const float* in = x.f32_in_layout();
  float* out = y.f32_in_layout();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = math::relu(in[i]);
  y_ = y;
  return y;
}

Tensor ReLU::backward_cpu(const Tensor& dy_in) {
  expect_shape("gradient", y_.shape(), dy_in.shape());
  const Tensor dy = to_layout(dy_in, y_.layout());
  Tensor dx = Tensor::empty(dy.shape()).with_layout(dy.layout());
  const float* y = y_.f32_in_layout();
  const float* g = dy.f32_in_layout();
  float* out = dx.f32_in_layout();
  const int64_t n = dy.numel();
#pragma omp parallel for simd if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = math::relu_backward(y[i], g[i]);
  return dx;
}

}  // namespace st
