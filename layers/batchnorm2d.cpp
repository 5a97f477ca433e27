#include "layers/batchnorm2d.h"

#include <cmath>

#include "core/kernels/half.h"
#include "core/kernels/math.h"
#include "core/layout.h"

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

namespace {
// Channel c's sum and centred sum of squares over the batch's m values (two passes:
// mean, then centred squares: stable where E[x^2]-E[x]^2 is not).
void channel_moments(const float* in, int64_t n, int64_t c_count, int64_t hw, int64_t c,
                     double& sum, double& centred_sq) {
  sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += plane_sum(in + (i * c_count + c) * hw, hw);
  const float mean = static_cast<float>(sum / static_cast<double>(n * hw));
  centred_sq = 0;
  for (int64_t i = 0; i < n; ++i)
    centred_sq += plane_centered_sq(in + (i * c_count + c) * hw, hw, mean);
}
}  // namespace

// Synchronised BatchNorm: each pass's per-channel sums (and the count) are summed over
// all ranks between the passes, so every rank normalises with the statistics of the
// combined batch (as PyTorch's SyncBatchNorm). Fills mean, biased and unbiased variance.
void BatchNorm2d::synced_statistics(const Tensor& x, float* mean, float* var, float* unbiased) {
  const int64_t n = x.dim(0), hw = x.dim(2) * x.dim(3), c_count = c_;
  const float* in = x.f32();
  Tensor sums = Tensor::empty(Shape{c_count + 1});
  float* s = sums.f32();
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < c_count; ++c) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += plane_sum(in + (i * c_count + c) * hw, hw);
    s[c] = static_cast<float>(total);
  }
  s[c_count] = static_cast<float>(n * hw);
  sync_(sums);
  const double m = s[c_count];
  sync_count_ = m;
  Tensor sq = Tensor::empty(Shape{c_count});
  float* q = sq.f32();
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < c_count; ++c) {
    mean[c] = static_cast<float>(s[c] / m);
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
      total += plane_centered_sq(in + (i * c_count + c) * hw, hw, mean[c]);
    q[c] = static_cast<float>(total);
  }
  sync_(sq);
  for (int64_t c = 0; c < c_count; ++c) {
    var[c] = static_cast<float>(q[c] / m);
    unbiased[c] = static_cast<float>(q[c] / (m - 1));
  }
}

std::optional<TensorSpec> BatchNorm2d::output_spec(const Tensor& x) const {
  check_input(x);
  // Synchronised statistics run a collective inside forward: the host waits for it.
  if (training_ && sync_) return std::nullopt;
  const TensorSpec in = taken_spec(x);
  // Computed in float32 and written in the input's type and layout (bfloat16 rounded once).
  return in;
}

Tensor BatchNorm2d::forward_cpu(const Tensor& x_in) {
  check_input(x_in);
  const bool synced = training_ && sync_;
  // Synchronised statistics read NCHW; bfloat16 is read only in the blocked layout.
  const Tensor x = synced            ? to_plain(cpu::to_dtype(x_in, DType::F32))
                   : x_in.is_plain() ? cpu::to_dtype(x_in, DType::F32)
                                     : x_in;
  x_ = x;
  in_dtype_ = x_in.dtype();
  in_layout_ = x_in.layout();
  const int64_t n = x.dim(0), hw = x.dim(2) * x.dim(3);
  const int64_t m = n * hw;
  used_batch_stats_ = training_;
  ST_CHECK(!training_ || m > 1 || synced, describe(),
           ": training needs more than one value per channel, got input ", x.shape());
  batch_mean_ = Tensor::empty(Shape{c_});
  batch_inv_std_ = Tensor::empty(Shape{c_});
  if (!x.is_plain()) return forward_blocked(x);
  Tensor synced_var, synced_unbiased;
  if (synced) {
    synced_var = Tensor::empty(Shape{c_});
    synced_unbiased = Tensor::empty(Shape{c_});
    synced_statistics(x, batch_mean_.f32(), synced_var.f32(), synced_unbiased.f32());
  }
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
    float mean, var, unbiased_var;
    if (synced) {
      mean = bm[c];
      var = synced_var.f32()[c];
      unbiased_var = synced_unbiased.f32()[c];
    } else if (train) {
      // One channel at a time, so its planes stay in cache across the passes.
      double s, ss;
      channel_moments(in, n, c_count, hw, c, s, ss);
      mean = static_cast<float>(s / static_cast<double>(m));
      var = static_cast<float>(ss / static_cast<double>(m));
      unbiased_var = static_cast<float>(ss / static_cast<double>(m - 1));
    } else {
      mean = rm[c];
      var = rv[c];
      unbiased_var = var;
    }
    if (train) {
      // Running variance uses the unbiased estimate, as PyTorch does.
      rm[c] = math::running_update(rm[c], mean, momentum_);
      rv[c] = math::running_update(rv[c], unbiased_var, momentum_);
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
  // Plain bfloat16 arrives where oneDNN computes bf16 channels-last (AMX): the next
  // layer gets bfloat16 as it would from the blocked path.
  return synced ? y : cpu::to_dtype(y, in_dtype_);
}

namespace {
// sum(dy) and sum(dy * (x - mean)) of channel c.
void channel_grad_sums(const float* in, const float* g, int64_t n, int64_t c_count, int64_t hw,
                       int64_t c, float mean, double& sum_dy, double& sum_dy_xc) {
  sum_dy = 0;
  sum_dy_xc = 0;
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
    sum_dy_xc += b;
  }
}
}  // namespace

void BatchNorm2d::channel_dx(const float* in, const float* g, float* out, int64_t n, int64_t hw,
                             int64_t c, float sdy, float sdx, float inv_m) const {
  const float mean = batch_mean_.f32()[c], inv_std = batch_inv_std_.f32()[c];
  const float gc = gamma_->value.f32()[c];
  for (int64_t i = 0; i < n; ++i) {
    const float* p = in + (i * c_ + c) * hw;
    const float* q = g + (i * c_ + c) * hw;
    float* r = out + (i * c_ + c) * hw;
    if (used_batch_stats_) {
#pragma omp simd
      for (int64_t j = 0; j < hw; ++j)
        r[j] = math::bn_backward_dx(q[j], (p[j] - mean) * inv_std, gc, inv_std, sdy, sdx, inv_m);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < hw; ++j) r[j] = q[j] * gc * inv_std;
    }
  }
}

Tensor BatchNorm2d::backward_cpu(const Tensor& dy_in) {
  expect_shape("gradient", x_.shape(), dy_in.shape());
  const Tensor dy = cpu::to_dtype(to_layout(dy_in, x_.layout()), x_.dtype());
  if (!x_.is_plain()) return backward_blocked(dy);
  const int64_t n = x_.dim(0), hw = x_.dim(2) * x_.dim(3);
  // With synchronised statistics, dx needs every rank's sums and count; the parameter
  // gradients stay this rank's (the exchange averages them).
  const bool synced = used_batch_stats_ && sync_;
  const float inv_m = 1.0f / static_cast<float>(synced ? sync_count_ : n * hw);
  Tensor dx = Tensor::empty(x_.shape());
  const float* in = x_.f32();
  const float* g = dy.f32();
  float* out = dx.f32();
  const float* bm = batch_mean_.f32();
  const float* bis = batch_inv_std_.f32();
  float* dgamma = gamma_->grad.f32();
  float* dbeta = beta_->grad.f32();
  Tensor sums = synced ? Tensor::empty(Shape{2 * c_}) : Tensor();
  const int64_t c_count = c_;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < c_count; ++c) {
    double sum_dy, sum_dy_xhat;
    channel_grad_sums(in, g, n, c_count, hw, c, bm[c], sum_dy, sum_dy_xhat);
    sum_dy_xhat *= bis[c];
    dgamma[c] += static_cast<float>(sum_dy_xhat);
    dbeta[c] += static_cast<float>(sum_dy);
    if (synced) {
      sums.f32()[c] = static_cast<float>(sum_dy);
      sums.f32()[c_count + c] = static_cast<float>(sum_dy_xhat);
    } else {
      // One channel at a time, so its planes stay in cache.
      channel_dx(in, g, out, n, hw, c, static_cast<float>(sum_dy), static_cast<float>(sum_dy_xhat),
                 inv_m);
    }
  }
  if (synced) {
    sync_(sums);
    const float* s = sums.f32();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < c_count; ++c)
      channel_dx(in, g, out, n, hw, c, s[c], s[c_count + c], inv_m);
  }
  gamma_->mark_grad_ready();
  beta_->mark_grad_ready();
  return to_layout(cpu::to_dtype(dx, in_dtype_), in_layout_);
}

}  // namespace st
