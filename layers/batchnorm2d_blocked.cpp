// BatchNorm2d on activations blocked in 16 channels (core/layout.h), float32 or bfloat16
// (--precision bf16: read and written in bfloat16, computed in float32): memory is
// [N, C/16, H*W, 16], so 16 consecutive floats are one position of 16 channels and every
// loop runs over whole vectors. The per-channel sums are taken per chunk of kChunk images
// and the chunks added in a fixed order afterwards: the threads share the work whatever
// the number of channel blocks (a 16-channel layer has one), and the result does not
// depend on the number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kernels/half_math.h"
#include "core/kernels/math.h"
#include "layers/batchnorm2d.h"

namespace st {

namespace {
constexpr int64_t kLanes = 16, kChunk = 8;

// Element i of a float or bfloat16 array as float, and back (bfloat16 rounds to nearest
// even): the arithmetic is float32 for both.
inline float load(const float* p, int64_t i) {
  return p[i];
}
inline float load(const uint16_t* p, int64_t i) {
  return half_math::bf16_to_float(p[i]);
}
inline void store(float* p, int64_t i, float v) {
  p[i] = v;
}
inline void store(uint16_t* p, int64_t i, float v) {
  p[i] = half_math::float_to_bf16(v);
}

// Sums over all images of what image_sums(i, b, acc) adds into acc[0, K * 16) for image
// i and channel block b. Returns [blocks][K * 16].
template <int K, class F>
std::vector<double> lane_sums(int64_t n, int64_t blocks, const F& image_sums) {
  const int64_t chunks = (n + kChunk - 1) / kChunk, width = K * kLanes;
  std::vector<double> part(static_cast<size_t>(blocks * chunks * width), 0.0);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t k = 0; k < chunks; ++k) {
      double* acc = &part[static_cast<size_t>((b * chunks + k) * width)];
      for (int64_t i = k * kChunk; i < std::min(n, (k + 1) * kChunk); ++i) image_sums(i, b, acc);
    }
  std::vector<double> out(static_cast<size_t>(blocks * width), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t k = 0; k < chunks; ++k)
      for (int64_t j = 0; j < width; ++j)
        out[static_cast<size_t>(b * width + j)] +=
            part[static_cast<size_t>((b * chunks + k) * width + j)];
  return out;
}

// Runs f(i, b) for every image and channel block, spread over the threads.
template <class F>
void each_plane(int64_t n, int64_t blocks, const F& f) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < blocks; ++b) f(i, b);
}
}  // namespace

Tensor BatchNorm2d::forward_blocked(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype()).with_layout(Layout::Blocked16);
  const int64_t n = x.dim(0), hw = x.dim(2) * x.dim(3);
  if (x.dtype() == DType::BF16)
    forward_blocked_of(x.bf16_in_layout(), y.bf16_in_layout(), n, hw);
  else
    forward_blocked_of(x.f32_in_layout(), y.f32_in_layout(), n, hw);
  return y;
}

template <class T>
void BatchNorm2d::forward_blocked_of(const T* in, T* out, int64_t n, int64_t hw) {
  const int64_t blocks = c_ / kLanes, m = n * hw, plane = hw * kLanes;
  float* bm = batch_mean_.f32();
  float* bis = batch_inv_std_.f32();
  if (training_) {
    // Two passes, mean and then centred squares, as the plain layout's (stable where
    // E[x^2] - E[x]^2 is not).
    const std::vector<double> sums =
        lane_sums<1>(n, blocks, [&](int64_t i, int64_t b, double* acc) {
          const T* p = in + (i * blocks + b) * plane;
          float s[kLanes] = {};
          for (int64_t q = 0; q < hw; ++q)
#pragma omp simd
            for (int64_t l = 0; l < kLanes; ++l) s[l] += load(p, q * kLanes + l);
          for (int64_t l = 0; l < kLanes; ++l) acc[l] += s[l];
        });
    for (int64_t c = 0; c < c_; ++c) bm[c] = static_cast<float>(sums[c] / static_cast<double>(m));
    const std::vector<double> sq = lane_sums<1>(n, blocks, [&](int64_t i, int64_t b, double* acc) {
      const T* p = in + (i * blocks + b) * plane;
      const float* mean = bm + b * kLanes;
      float s[kLanes] = {};
      for (int64_t q = 0; q < hw; ++q)
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l) {
          const float d = load(p, q * kLanes + l) - mean[l];
          s[l] += d * d;
        }
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += s[l];
    });
    float* rm = mean_->value.f32();
    float* rv = var_->value.f32();
    for (int64_t c = 0; c < c_; ++c) {
      const float var = static_cast<float>(sq[c] / static_cast<double>(m));
      const float unbiased = static_cast<float>(sq[c] / static_cast<double>(m - 1));
      rm[c] = math::running_update(rm[c], bm[c], momentum_);
      rv[c] = math::running_update(rv[c], unbiased, momentum_);
      bis[c] = 1.0f / std::sqrt(var + eps_);
    }
    ++tracked_->value.data<int64_t>()[0];
  } else {
    for (int64_t c = 0; c < c_; ++c) {
      bm[c] = mean_->value.f32()[c];
      bis[c] = 1.0f / std::sqrt(var_->value.f32()[c] + eps_);
    }
  }
  const float* gamma = gamma_->value.f32();
  const float* beta = beta_->value.f32();
  each_plane(n, blocks, [&](int64_t i, int64_t b) {
    const T* p = in + (i * blocks + b) * plane;
    T* r = out + (i * blocks + b) * plane;
    float mean[kLanes], is[kLanes], gc[kLanes], bc[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) {
      const int64_t c = b * kLanes + l;
      mean[l] = bm[c];
      is[l] = bis[c];
      gc[l] = gamma[c];
      bc[l] = beta[c];
    }
    for (int64_t q = 0; q < hw; ++q)
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l)
        store(r, q * kLanes + l,
              math::bn_normalize(load(p, q * kLanes + l), mean[l], is[l], gc[l], bc[l]));
  });
}

Tensor BatchNorm2d::backward_blocked(const Tensor& dy) {
  Tensor dx = Tensor::empty(x_.shape(), x_.dtype()).with_layout(Layout::Blocked16);
  const int64_t n = x_.dim(0), hw = x_.dim(2) * x_.dim(3);
  if (x_.dtype() == DType::BF16)
    backward_blocked_of(x_.bf16_in_layout(), dy.bf16_in_layout(), dx.bf16_in_layout(), n, hw);
  else
    backward_blocked_of(x_.f32_in_layout(), dy.f32_in_layout(), dx.f32_in_layout(), n, hw);
  gamma_->mark_grad_ready();
  beta_->mark_grad_ready();
  return dx;
}

template <class T>
void BatchNorm2d::backward_blocked_of(const T* in, const T* g, T* out, int64_t n, int64_t hw) {
  const int64_t blocks = c_ / kLanes, plane = hw * kLanes;
  const float inv_m = 1.0f / static_cast<float>(n * hw);
  const float* bm = batch_mean_.f32();
  const float* bis = batch_inv_std_.f32();
  // Per channel: sum(dy) in [0, 16) of a block's row, sum(dy * (x - mean)) in [16, 32).
  const std::vector<double> sums = lane_sums<2>(n, blocks, [&](int64_t i, int64_t b, double* acc) {
    const T* p = in + (i * blocks + b) * plane;
    const T* q = g + (i * blocks + b) * plane;
    const float* mean = bm + b * kLanes;
    float s[kLanes] = {}, t[kLanes] = {};
    for (int64_t j = 0; j < hw; ++j)
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l) {
        const float gy = load(q, j * kLanes + l);
        s[l] += gy;
        t[l] += gy * (load(p, j * kLanes + l) - mean[l]);
      }
    for (int64_t l = 0; l < kLanes; ++l) {
      acc[l] += s[l];
      acc[kLanes + l] += t[l];
    }
  });
  std::vector<float> sum_dy(static_cast<size_t>(c_)), sum_dy_xhat(static_cast<size_t>(c_));
  float* dgamma = gamma_->grad.f32();
  float* dbeta = beta_->grad.f32();
  for (int64_t c = 0; c < c_; ++c) {
    const int64_t row = (c / kLanes) * 2 * kLanes + c % kLanes;
    const double sdy = sums[static_cast<size_t>(row)];
    const double sdx = sums[static_cast<size_t>(row + kLanes)] * bis[c];
    dgamma[c] += static_cast<float>(sdx);
    dbeta[c] += static_cast<float>(sdy);
    sum_dy[static_cast<size_t>(c)] = static_cast<float>(sdy);
    sum_dy_xhat[static_cast<size_t>(c)] = static_cast<float>(sdx);
  }
  const float* gamma = gamma_->value.f32();
  const bool batch_stats = used_batch_stats_;
  each_plane(n, blocks, [&](int64_t i, int64_t b) {
    const T* p = in + (i * blocks + b) * plane;
    const T* q = g + (i * blocks + b) * plane;
    T* r = out + (i * blocks + b) * plane;
    // The block's 16 channels' constants in registers-sized arrays, so the loops vectorise.
    float mean[kLanes], is[kLanes], gc[kLanes], sdy[kLanes], sdx[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) {
      const size_t c = static_cast<size_t>(b * kLanes + l);
      mean[l] = bm[c];
      is[l] = bis[c];
      gc[l] = gamma[c];
      sdy[l] = sum_dy[c];
      sdx[l] = sum_dy_xhat[c];
    }
    if (batch_stats) {
      for (int64_t j = 0; j < hw; ++j)
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l)
          store(r, j * kLanes + l,
                math::bn_backward_dx(load(q, j * kLanes + l),
                                     (load(p, j * kLanes + l) - mean[l]) * is[l], gc[l], is[l],
                                     sdy[l], sdx[l], inv_m));
    } else {
      for (int64_t j = 0; j < hw; ++j)
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l)
          store(r, j * kLanes + l, load(q, j * kLanes + l) * gc[l] * is[l]);
    }
  });
}

}  // namespace st
