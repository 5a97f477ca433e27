#include "layers/linear.h"

#include <cmath>
#include <vector>

#include "core/kernels/blas.h"
#include "layers/init.h"

namespace st {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Rng& rng)
    : in_(in_features), out_(out_features) {
  ST_CHECK(in_features > 0 && out_features > 0, "Linear: features must be positive, got ",
           in_features, " -> ", out_features);
  weight_ = &add_param("weight", Shape{out_, in_}, ParamKind::Weight);
  weight_->provides_sq_grad = true;
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  init::uniform(weight_->value, bound, rng);
  if (bias) {
    bias_ = &add_param("bias", Shape{out_}, ParamKind::Bias);
    bias_->provides_sq_grad = true;
    init::uniform(bias_->value, bound, rng);
  }
}

Linear::Linear(Param& shared, bool bias) : weight_(&shared), tied_(true) {
  ST_CHECK(shared.value.rank() == 2, "Linear: a tied weight must be a matrix, got ",
           shared.value.shape());
  in_ = shared.value.dim(1);
  out_ = shared.value.dim(0);
  if (bias) bias_ = &add_param("bias", Shape{out_}, ParamKind::Bias);
}

std::string Linear::describe() const {
  return "Linear(" + std::to_string(in_) + "->" + std::to_string(out_) +
         (tied_ ? ", tied weight)" : ")");
}

void Linear::check_input(const Tensor& x) const {
  ST_CHECK(x.rank() == 2 && x.dim(1) == in_, describe(), ": expected input shape [N, ", in_,
           "], got ", x.shape());
}

std::optional<TensorSpec> Linear::output_spec(const Tensor& x) const {
  // A tied weight's gradient is announced by its owner: backward stays one waited task.
  if (tied_) return std::nullopt;
  check_input(x);
  return TensorSpec{Shape{x.dim(0), out_}};
}

Tensor Linear::forward_cpu(const Tensor& x) {
  check_input(x);
  x_ = cpu::rounded(x, precision_);
  w_ = cpu::rounded(weight_->value, precision_);
  const int64_t n = x.dim(0);
  Tensor y = Tensor::empty(Shape{n, out_});
  float* out = y.f32();
  if (bias_) {
    const float* b = bias_->value.f32();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out_; ++j) out[i * out_ + j] = b[j];
  }
  cpu::gemm(false, true, n, out_, in_, 1.0f, x_.f32(), w_.f32(), bias_ ? 1.0f : 0.0f, out);
  if (precision_ == Precision::F16) cpu::round_to(Precision::F16, out, out, y.numel());
  return y;
}

Tensor Linear::backward_cpu(const Tensor& dy_in) {
  const int64_t n = x_.dim(0);
  expect_shape("gradient", Shape{n, out_}, dy_in.shape());
  const Tensor dy = cpu::rounded(dy_in, precision_);
  const float* g = dy.f32();
  // dW += dy^T x ; db += sum_rows(dy) ; dx = dy W
  cpu::gemm(true, false, out_, in_, n, 1.0f, g, x_.f32(), 1.0f, weight_->grad.f32());
  // Opt-in per-sample squared-gradient sums (Param::sq_grad): sample i's weight term is
  // dy_i x_i^T, so sum_i (dy_i x_i^T)^2 = (dy^2)^T (x^2) elementwise, one more GEMM, exact.
  const bool sq_w = weight_->sq_grad.defined(), sq_b = bias_ && bias_->sq_grad.defined();
  std::vector<float> dy2;
  if (sq_w || sq_b) {
    dy2.resize(n * out_);
    for (int64_t i = 0; i < n * out_; ++i) dy2[i] = g[i] * g[i];
  }
  if (sq_w) {
    std::vector<float> x2(n * in_);
    const float* xi = x_.f32();
    for (int64_t i = 0; i < n * in_; ++i) x2[i] = xi[i] * xi[i];
    cpu::gemm(true, false, out_, in_, n, 1.0f, dy2.data(), x2.data(), 1.0f, weight_->sq_grad.f32());
  }
  if (!tied_) weight_->mark_grad_ready();
  if (bias_) {
    float* db = bias_->grad.f32();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out_; ++j) db[j] += g[i * out_ + j];
    if (sq_b) {
      float* sb = bias_->sq_grad.f32();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < out_; ++j) sb[j] += dy2[i * out_ + j];
    }
    bias_->mark_grad_ready();
  }
  Tensor dx = Tensor::empty(x_.shape());
  cpu::gemm(false, false, n, in_, out_, 1.0f, g, w_.f32(), 0.0f, dx.f32());
  if (precision_ == Precision::F16) cpu::round_to(Precision::F16, dx.f32(), dx.f32(), dx.numel());
  return dx;
}

}  // namespace st
