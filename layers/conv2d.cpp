#include "layers/conv2d.h"

#include <cmath>
#include <vector>

#include "core/kernels/blas.h"
#include "core/parallel.h"
#include "layers/init.h"

namespace st {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int kernel, int stride, int pad,
               bool bias, Rng& rng)
    : cin_(in_channels), cout_(out_channels), k_(kernel), stride_(stride), pad_(pad) {
  ST_CHECK(cin_ > 0 && cout_ > 0 && k_ > 0 && stride_ > 0 && pad_ >= 0, "Conv2d: invalid geometry ",
           cin_, "->", cout_, " kernel ", k_, " stride ", stride_, " pad ", pad_);
  weight_ = &add_param("weight", Shape{cout_, cin_, k_, k_}, ParamKind::Weight);
  const float bound = 1.0f / std::sqrt(static_cast<float>(cin_ * k_ * k_));
  init::uniform(weight_->value, bound, rng);
  if (bias) {
    bias_ = &add_param("bias", Shape{cout_}, ParamKind::Bias);
    init::uniform(bias_->value, bound, rng);
  }
}

std::string Conv2d::describe() const {
  return "Conv2d(" + std::to_string(cin_) + "->" + std::to_string(cout_) + ", k" +
         std::to_string(k_) + ", s" + std::to_string(stride_) + ", p" + std::to_string(pad_) + ")";
}

cpu::ConvGeometry Conv2d::geometry(const Tensor& x) const {
  ST_CHECK(x.rank() == 4 && x.dim(1) == cin_, describe(), ": expected input shape [N, ", cin_,
           ", H, W], got ", x.shape());
  cpu::ConvGeometry g{cin_, x.dim(2), x.dim(3), k_, k_, stride_, pad_, 0, 0};
  g.oh = (g.h + 2 * pad_ - k_) / stride_ + 1;
  g.ow = (g.w + 2 * pad_ - k_) / stride_ + 1;
  ST_CHECK(g.oh > 0 && g.ow > 0, describe(), ": input shape ", x.shape(),
           " is smaller than the kernel");
  return g;
}

Tensor Conv2d::forward_cpu(const Tensor& x) {
  g_ = geometry(x);
  x_ = x;
  const cpu::ConvGeometry g = g_;
  const int64_t n = x.dim(0), ohw = g.oh * g.ow, ckk = cin_ * k_ * k_;
  Tensor y = Tensor::empty(Shape{n, cout_, g.oh, g.ow});
  const float* in = x.f32();
  const float* w = weight_->value.f32();
  const float* b = bias_ ? bias_->value.f32() : nullptr;
  float* out = y.f32();
  const bool pointwise = is_pointwise();
  // Each thread owns a run of images and one column buffer.
  parallel_for(n, 2, [&](int64_t begin, int64_t end) {
    std::vector<float> col(pointwise ? 0 : ckk * ohw);
    for (int64_t i = begin; i < end; ++i) {
      const float* xi = in + i * cin_ * g.h * g.w;
      float* yi = out + i * cout_ * ohw;
      if (!pointwise) cpu::im2col(xi, g, col.data());
      cpu::gemm(false, false, cout_, ohw, ckk, 1.0f, w, pointwise ? xi : col.data(), 0.0f, yi);
      if (b) {
        for (int64_t c = 0; c < cout_; ++c)
          for (int64_t j = 0; j < ohw; ++j) yi[c * ohw + j] += b[c];
      }
    }
  });
  return y;
}

Tensor Conv2d::backward_cpu(const Tensor& dy) {
  const cpu::ConvGeometry g = g_;
  const int64_t n = x_.dim(0), ohw = g.oh * g.ow, ckk = cin_ * k_ * k_, chw = cin_ * g.h * g.w;
  expect_shape("gradient", Shape{n, cout_, g.oh, g.ow}, dy.shape());
  Tensor dx = Tensor::empty(x_.shape());
  const float* in = x_.f32();
  const float* gy = dy.f32();
  const float* w = weight_->value.f32();
  float* gx = dx.f32();
  const bool pointwise = is_pointwise();
  const int threads = num_threads();
  // Per-thread partial weight/bias gradients, summed after the parallel loop.
  std::vector<std::vector<float>> dw_part(threads), db_part(threads);
  parallel_for(n, 2, [&](int64_t begin, int64_t end) {
    const int t = static_cast<int>(omp_thread_id());
    std::vector<float>& dw = dw_part[t];
    dw.assign(cout_ * ckk, 0.0f);
    if (bias_) db_part[t].assign(cout_, 0.0f);
    std::vector<float> col(pointwise ? 0 : ckk * ohw), dcol(pointwise ? 0 : ckk * ohw);
    for (int64_t i = begin; i < end; ++i) {
      const float* xi = in + i * chw;
      const float* gyi = gy + i * cout_ * ohw;
      float* gxi = gx + i * chw;
      if (!pointwise) cpu::im2col(xi, g, col.data());
      // dW += dy_i [Cout, OHW] * col_i^T [OHW, CKK]
      cpu::gemm(false, true, cout_, ckk, ohw, 1.0f, gyi, pointwise ? xi : col.data(), 1.0f,
                dw.data());
      // dcol = W^T [CKK, Cout] * dy_i [Cout, OHW]; col2im scatters it into dx_i.
      if (pointwise) {
        cpu::gemm(true, false, ckk, ohw, cout_, 1.0f, w, gyi, 0.0f, gxi);
      } else {
        cpu::gemm(true, false, ckk, ohw, cout_, 1.0f, w, gyi, 0.0f, dcol.data());
        std::fill(gxi, gxi + chw, 0.0f);
        cpu::col2im(dcol.data(), g, gxi);
      }
      if (bias_) {
        float* db = db_part[t].data();
        for (int64_t c = 0; c < cout_; ++c) {
          float s = 0.0f;
          for (int64_t j = 0; j < ohw; ++j) s += gyi[c * ohw + j];
          db[c] += s;
        }
      }
    }
  });
  float* dw = weight_->grad.f32();
  for (const auto& part : dw_part)
    for (size_t j = 0; j < part.size(); ++j) dw[j] += part[j];
  weight_->mark_grad_ready();
  if (bias_) {
    float* db = bias_->grad.f32();
    for (const auto& part : db_part)
      for (size_t j = 0; j < part.size(); ++j) db[j] += part[j];
    bias_->mark_grad_ready();
  }
  return dx;
}

}  // namespace st
