#include "layers/batchnorm2d.h"

#include <cmath>

#include "core/kernels/math.h"

namespace st {

BatchNorm2d::BatchNorm2d(int64_t channels, float eps, float momentum)
    : c_(channels), eps_(eps), momentum_(momentum) {
  ST_CHECK(channels > 0, "BatchNorm2d: channels must be positive, got ", channels);
  gamma_ = &add_param("weight", Shape{c_}, ParamKind::Norm);
  gamma_->value.fill(1.0f);
  beta_ = &add_param("bias", Shape{c_}, ParamKind::Norm);
  mean_ = &add_buffer("running_mean", Tensor::zeros(Shape{c_}));
  var_ = &add_buffer("running_var", Tensor::full(Shape{c_}, 1.0f));
  tracked_ = &add_buffer("num_batches_tracked", Tensor::zeros(Shape{}, DType::I64));
}

void BatchNorm2d::check_input(const Tensor& x) const {
  ST_CHECK(x.rank() == 4 && x.dim(1) == c_, describe(), ": expected input shape [N, ", c_,
           ", H, W], got ", x.shape());
}

namespace {
// Per-plane sums run in float with SIMD lanes (vectorisable), planes accumulate in
// double: the rounding error stays that of a plane, not of the whole channel.
inline double plane_sum(const float* p, int64_t hw) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < hw; ++j) s += p[j];
  return s;
}
inline double plane_centered_sq(const float* p, int64_t hw, float mean) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < hw; ++j) s += (p[j] - mean) * (p[j] - mean);
  return s;
}
}  // namespace

Tensor BatchNorm2d::forward_cpu(const Tensor& x) {
  check_input(x);
  x_ = x;
  const int64_t n = x.dim(0), hw = x.dim(2) * x.dim(3);
  const int64_t m = n * hw;
  used_batch_stats_ = training_;
  ST_CHECK(!training_ || m > 1, describe(),
           ": training needs more than one value per channel, got input ", x.shape());
  batch_mean_ = Tensor::empty(Shape{c_});
  batch_inv_std_ = Tensor::empty(Shape{c_});
  Tensor y = Tensor::empty(x.shape());
  const float* in = x.f32();
  float* out = y.f32();
  float* bm = batch_mean_.f32();
  float* bis = batch_inv_std_.f32();
  float* rm = mean_->value.f32();
  float* rv = var_->value.f32();
  const float* gamma = gamma_->value.f32();
  const float* beta = beta_->value.f32();
  const bool train = training_;
  const int64_t c_count = c_;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < c_count; ++c) {
    float mean, var;
    if (train) {
      // Two passes (mean, then centred squares): stable where E[x^2]-E[x]^2 is not.
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += plane_sum(in + (i * c_count + c) * hw, hw);
      mean = static_cast<float>(s / static_cast<double>(m));
      double ss = 0;
      for (int64_t i = 0; i < n; ++i)
        ss += plane_centered_sq(in + (i * c_count + c) * hw, hw, mean);
      var = static_cast<float>(ss / static_cast<double>(m));
      // Running variance uses the unbiased estimate, as PyTorch does.
      rm[c] = math::running_update(rm[c], mean, momentum_);
      rv[c] = math::running_update(rv[c], static_cast<float>(ss / static_cast<double>(m - 1)),
                                   momentum_);
    } else {
      mean = rm[c];
      var = rv[c];
    }
    const float inv_std = 1.0f / std::sqrt(var + eps_);
    bm[c] = mean;
    bis[c] = inv_std;
    const float g = gamma[c], b = beta[c];
    for (int64_t i = 0; i < n; ++i) {
      const float* p = in + (i * c_count + c) * hw;
      float* q = out + (i * c_count + c) * hw;
#pragma omp simd
      for (int64_t j = 0; j < hw; ++j) q[j] = math::bn_normalize(p[j], mean, inv_std, g, b);
    }
  }
  if (train) ++tracked_->value.data<int64_t>()[0];
  return y;
}

Tensor BatchNorm2d::backward_cpu(const Tensor& dy) {
  expect_shape("gradient", x_.shape(), dy.shape());
  const int64_t n = x_.dim(0), hw = x_.dim(2) * x_.dim(3);
  const float inv_m = 1.0f / static_cast<float>(n * hw);
  Tensor dx = Tensor::empty(x_.shape());
  const float* in = x_.f32();
  const float* g = dy.f32();
  float* out = dx.f32();
  const float* bm = batch_mean_.f32();
  const float* bis = batch_inv_std_.f32();
  const float* gamma = gamma_->value.f32();
  float* dgamma = gamma_->grad.f32();
  float* dbeta = beta_->grad.f32();
  const bool batch_stats = used_batch_stats_;
  const int64_t c_count = c_;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < c_count; ++c) {
    const float mean = bm[c], inv_std = bis[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = in + (i * c_count + c) * hw;
      const float* q = g + (i * c_count + c) * hw;
      float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
      for (int64_t j = 0; j < hw; ++j) {
        a += q[j];
        b += q[j] * (p[j] - mean);
      }
      sum_dy += a;
      sum_dy_xhat += b;
    }
    sum_dy_xhat *= inv_std;
    dgamma[c] += static_cast<float>(sum_dy_xhat);
    dbeta[c] += static_cast<float>(sum_dy);
    const float sdy = static_cast<float>(sum_dy), sdx = static_cast<float>(sum_dy_xhat);
    const float gc = gamma[c];
    for (int64_t i = 0; i < n; ++i) {
      const float* p = in + (i * c_count + c) * hw;
      const float* q = g + (i * c_count + c) * hw;
      float* r = out + (i * c_count + c) * hw;
      if (batch_stats) {
#pragma omp simd
        for (int64_t j = 0; j < hw; ++j)
          r[j] = math::bn_backward_dx(q[j], (p[j] - mean) * inv_std, gc, inv_std, sdy, sdx, inv_m);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < hw; ++j) r[j] = q[j] * gc * inv_std;
      }
    }
  }
  gamma_->mark_grad_ready();
  beta_->mark_grad_ready();
  return dx;
}

}  // namespace st
