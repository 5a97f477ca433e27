#include "layers/dropout.h"

#include "core/kernels/math.h"

namespace st {

Dropout::Dropout(float p, uint64_t seed) : p_(p), seed_(seed) {
  ST_CHECK(p >= 0.0f && p < 1.0f, "Dropout: probability must be in [0, 1), got ", p);
}

uint64_t Dropout::next_stream() {
  if (!frozen_) stream_ = calls_++;
  return stream_;
}

Tensor Dropout::forward_cpu(const Tensor& x) {
  shape_ = x.shape();
  if (!training_ || p_ == 0.0f) return x;
  const uint64_t stream = next_stream();
  Tensor y = Tensor::empty(x.shape());
  const float* in = x.f32();
  float* out = y.f32();
  const float scale = 1.0f / (1.0f - p_);
  const int64_t n = x.numel();
#pragma omp parallel for if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    out[i] = math::dropout_keep(seed_, stream, i, p_) ? in[i] * scale : 0.0f;
  return y;
}

Tensor Dropout::backward_cpu(const Tensor& dy) {
  expect_shape("gradient", shape_, dy.shape());
  if (!training_ || p_ == 0.0f) return dy;
  Tensor dx = Tensor::empty(dy.shape());
  const float* g = dy.f32();
  float* out = dx.f32();
  const float scale = 1.0f / (1.0f - p_);
  const int64_t n = dy.numel();
#pragma omp parallel for if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    out[i] = math::dropout_keep(seed_, stream_, i, p_) ? g[i] * scale : 0.0f;
  return dx;
}

}  // namespace st
