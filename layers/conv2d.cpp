#include "layers/conv2d.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/kernels/blas.h"
#include "core/layout.h"
#include "core/parallel.h"
#include "layers/init.h"

namespace st {

namespace {
// "3" for a square size, "1x7" (rows x columns) otherwise.
std::string hw_text(int h, int w) {
  return h == w ? std::to_string(h) : std::to_string(h) + "x" + std::to_string(w);
}
}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Hw kernel, Hw stride, Hw pad, bool bias,
               Rng& rng)
    : cin_(in_channels),
      cout_(out_channels),
      kh_(kernel.h),
      kw_(kernel.w),
      sh_(stride.h),
      sw_(stride.w),
      ph_(pad.h),
      pw_(pad.w) {
  ST_CHECK(
      cin_ > 0 && cout_ > 0 && kh_ > 0 && kw_ > 0 && sh_ > 0 && sw_ > 0 && ph_ >= 0 && pw_ >= 0,
      "Conv2d: invalid geometry ", cin_, "->", cout_, " kernel ", hw_text(kh_, kw_), " stride ",
      hw_text(sh_, sw_), " pad ", hw_text(ph_, pw_));
  weight_ = &add_param("weight", Shape{cout_, cin_, kh_, kw_}, ParamKind::Weight);
  weight_->provides_sq_grad = true;
  // PyTorch's default: U(-b, b) with b = 1/sqrt(fan_in), fan_in = Cin * KH * KW.
  const float bound = 1.0f / std::sqrt(static_cast<float>(cin_ * kh_ * kw_));
  init::uniform(weight_->value, bound, rng);
  if (bias) {
    bias_ = &add_param("bias", Shape{cout_}, ParamKind::Bias);
    bias_->provides_sq_grad = true;
    init::uniform(bias_->value, bound, rng);
  }
}

std::string Conv2d::describe() const {
  return "Conv2d(" + std::to_string(cin_) + "->" + std::to_string(cout_) + ", k" +
         hw_text(kh_, kw_) + ", s" + hw_text(sh_, sw_) + ", p" + hw_text(ph_, pw_) + ")";
}

cpu::ConvGeometry Conv2d::geometry(const Tensor& x) const {
  ST_CHECK(x.rank() == 4 && x.dim(1) == cin_, describe(), ": expected input shape [N, ", cin_,
           ", H, W], got ", x.shape());
  cpu::ConvGeometry g{.c = cin_,
                      .h = x.dim(2),
                      .w = x.dim(3),
                      .kh = kh_,
                      .kw = kw_,
                      .sh = sh_,
                      .sw = sw_,
                      .ph = ph_,
                      .pw = pw_,
                      .oh = 0,
                      .ow = 0};
  // An input smaller than the padded kernel gives no output (checked below).
  const int64_t rows = g.h + 2 * ph_ - kh_, cols = g.w + 2 * pw_ - kw_;
  g.oh = rows < 0 ? 0 : rows / sh_ + 1;
  g.ow = cols < 0 ? 0 : cols / sw_ + 1;
  ST_CHECK(g.oh > 0 && g.ow > 0, describe(), ": input shape ", x.shape(),
           " is smaller than the kernel");
  return g;
}

namespace {
// Per-thread scratch reused across calls: no allocation and no zero-fill on the hot
// path (every element is written before it is read).
float* scratch(int slot, int64_t floats) {
  thread_local std::vector<float> buffers[5];
  std::vector<float>& b = buffers[slot];
  if (static_cast<int64_t>(b.size()) < floats) b.resize(floats);
  return b.data();
}

// out += the sum of the per-thread partial buffers (weight/bias gradients and their squares).
void add_partials(const std::vector<std::vector<float>>& parts, float* out) {
  for (const auto& part : parts)
    for (size_t j = 0; j < part.size(); ++j) out[j] += part[j];
}
}  // namespace

// Images per GEMM: enough columns that the GEMM runs near peak, few enough that the
// column buffer stays within the per-core L2 cache (measured with bench/conv_bench).
int64_t Conv2d::images_per_gemm(const cpu::ConvGeometry& g) const {
  const int64_t ohw = g.oh * g.ow, ckk = cin_ * kh_ * kw_;
  const int64_t by_cols = std::max<int64_t>(1, (kTargetColumns + ohw - 1) / ohw);
  const int64_t by_cache = std::max<int64_t>(1, kColumnBufferBytes / (4 * ckk * ohw));
  return std::min(by_cols, by_cache);
}

void Conv2d::set_cpu_algo(CpuConvAlgo algo) {
  ST_CHECK(algo != CpuConvAlgo::OneDnn || cpu::onednn_built(), describe(),
           ": oneDNN requested but this build has no oneDNN (install libdnnl-dev)");
  algo_ = algo;
  onednn_.reset();
}

void Conv2d::set_precision(Precision p) {
  precision_ = p;
  onednn_.reset();
}

Precision Conv2d::emulated() const {
  return precision_ == Precision::BF16 && uses_onednn() ? Precision::F32 : precision_;
}

std::optional<TensorSpec> Conv2d::output_spec(const Tensor& x) const {
  const cpu::ConvGeometry g = geometry(x);
  const Shape y{x.dim(0), cout_, g.oh, g.ow};
  if (!uses_onednn()) return TensorSpec{y};
  const cpu::ConvDTypes io{taken_spec(x).dtype == DType::BF16,
                           precision_ == Precision::BF16 && blocked_output_};
  // oneDNN chooses the output's layout when it builds the primitives, in the first
  // forward of an input shape: that forward runs as a task the host waits for.
  if (!onednn_ || !onednn_->matches(x.dim(0), g, io)) return std::nullopt;
  const bool blocked = blocked_output_ && takes_blocked() && onednn_->writes_blocked_in_place();
  return TensorSpec{y, io.y_dtype(), blocked ? Layout::Blocked16 : Layout::Plain};
}

Tensor Conv2d::forward_cpu(const Tensor& x) {
  g_ = geometry(x);
  x_ = cpu::rounded(x, emulated());  // F32 (also for oneDNN's bf16): x itself
  w_ = cpu::rounded(weight_->value, emulated());
  Tensor y;
  if (!uses_onednn()) {
    onednn_.reset();
    y = forward_im2col(x_);
  } else {
    const int64_t n = x.dim(0);
    // Under bf16, activations between the layers of a ResNet stay bfloat16, as PyTorch's
    // autocast keeps them (its convolutions return bf16 tensors): half the bytes for the
    // layers between convolutions to read and write, and no rounding reorder before each
    // convolution.
    const cpu::ConvDTypes io{x.dtype() == DType::BF16,
                             precision_ == Precision::BF16 && blocked_output_};
    if (!onednn_ || !onednn_->matches(n, g_, io))
      onednn_ = std::make_unique<cpu::OneDnnConv>(n, cout_, g_, bias_ != nullptr,
                                                  precision_ == Precision::BF16, io);
    const cpu::ConvLayouts layouts{
        !x_.is_plain(), blocked_output_ && takes_blocked() && onednn_->writes_blocked_in_place()};
    y = Tensor::empty(Shape{n, cout_, g_.oh, g_.ow}, io.y_dtype())
            .with_layout(layouts.y ? Layout::Blocked16 : Layout::Plain);
    onednn_->forward(x_.raw(), w_.f32(), bias_ ? bias_->value.f32() : nullptr, y.raw(), layouts);
  }
  if (precision_ == Precision::F16) cpu::round_to(Precision::F16, y.f32(), y.f32(), y.numel());
  return y;
}

Tensor Conv2d::backward_cpu(const Tensor& dy_in) {
  expect_shape("gradient", Shape{x_.dim(0), cout_, g_.oh, g_.ow}, dy_in.shape());
  // oneDNN reads dy in y's type; the reference rounds it to the emulated format.
  const Tensor dy =
      onednn_ ? cpu::to_dtype(dy_in, onednn_->io().y_dtype()) : cpu::rounded(dy_in, emulated());
  Tensor dx;
  if (onednn_) {
    // dx in the layout and type x came in, which the layer before takes back.
    dx = Tensor::empty(x_.shape(), x_.dtype()).with_layout(x_.layout());
    onednn_->backward(x_.raw(), w_.f32(), dy.raw(), weight_->grad.f32(),
                      bias_ ? bias_->grad.f32() : nullptr, dx.raw(),
                      {!x_.is_plain(), !dy.is_plain()});
  } else {
    dx = backward_im2col(dy);
  }
  if (precision_ == Precision::F16) cpu::round_to(Precision::F16, dx.f32(), dx.f32(), dx.numel());
  // Before the gradients are marked ready: the exchange hook of a bucket reads sq_grad.
  if (weight_->sq_grad.defined() || (bias_ && bias_->sq_grad.defined())) {
    x_ = to_plain(cpu::to_dtype(x_, DType::F32));  // the reference loops read NCHW floats
    accumulate_sq_grads(to_plain(cpu::to_dtype(dy, DType::F32)));
  }
  weight_->mark_grad_ready();
  if (bias_) bias_->mark_grad_ready();
  return dx;
}

// One image's column matrix [CKK, OHW] into `col` (row stride ld, so several images can
// share one matrix): im2col, or a plain copy for a pointwise convolution.
void Conv2d::image_to_columns(const float* xi, const cpu::ConvGeometry& g, float* col,
                              int64_t ld) const {
  if (is_pointwise()) {
    const int64_t ohw = g.oh * g.ow;
    for (int64_t c = 0; c < cin_; ++c) std::copy(xi + c * ohw, xi + (c + 1) * ohw, col + c * ld);
  } else {
    cpu::im2col(xi, g, col, ld);
  }
}

Tensor Conv2d::forward_im2col(const Tensor& x) {
  const cpu::ConvGeometry g = g_;
  const int64_t n = x.dim(0), ohw = g.oh * g.ow, ckk = cin_ * kh_ * kw_, chw = cin_ * g.h * g.w;
  Tensor y = Tensor::empty(Shape{n, cout_, g.oh, g.ow});
  const float* in = x.f32();
  const float* w = w_.f32();
  const float* b = bias_ ? bias_->value.f32() : nullptr;
  float* out = y.f32();
  const int64_t chunk = images_per_gemm(g);
  // Each thread takes a run of images; `chunk` images share one column matrix
  // [CKK, chunk*OHW] and one GEMM, whose [Cout, chunk*OHW] result is then copied
  // to the NCHW output image by image.
  parallel_for(n, 2, [&](int64_t begin, int64_t end) {
    float* col = scratch(0, ckk * chunk * ohw);
    float* res = scratch(1, cout_ * chunk * ohw);
    for (int64_t i0 = begin; i0 < end; i0 += chunk) {
      const int64_t nb = std::min(chunk, end - i0), ld = nb * ohw;
      for (int64_t j = 0; j < nb; ++j) image_to_columns(in + (i0 + j) * chw, g, col + j * ohw, ld);
      cpu::gemm(false, false, cout_, ld, ckk, 1.0f, w, col, 0.0f, res);
      for (int64_t j = 0; j < nb; ++j) {
        float* yi = out + (i0 + j) * cout_ * ohw;
        for (int64_t c = 0; c < cout_; ++c) {
          const float* r = res + c * ld + j * ohw;
          const float bc = b ? b[c] : 0.0f;
          for (int64_t p = 0; p < ohw; ++p) yi[c * ohw + p] = r[p] + bc;
        }
      }
    }
  });
  return y;
}

Tensor Conv2d::backward_im2col(const Tensor& dy) {
  const cpu::ConvGeometry g = g_;
  const int64_t n = x_.dim(0), ohw = g.oh * g.ow, ckk = cin_ * kh_ * kw_, chw = cin_ * g.h * g.w;
  Tensor dx = Tensor::empty(x_.shape());
  const float* in = x_.f32();
  const float* gy = dy.f32();
  const float* w = w_.f32();
  float* gx = dx.f32();
  const bool pointwise = is_pointwise();
  const int64_t chunk = images_per_gemm(g);
  const int threads = num_threads();
  // Per-thread partial weight/bias gradients, summed after the parallel loop.
  std::vector<std::vector<float>> dw_part(threads), db_part(threads);
  parallel_for(n, 2, [&](int64_t begin, int64_t end) {
    const int t = static_cast<int>(omp_thread_id());
    std::vector<float>& dw = dw_part[t];
    dw.assign(cout_ * ckk, 0.0f);
    if (bias_) db_part[t].assign(cout_, 0.0f);
    float* col = scratch(0, ckk * chunk * ohw);
    float* dcol = scratch(1, ckk * chunk * ohw);
    float* gyc = scratch(2, cout_ * chunk * ohw);
    for (int64_t i0 = begin; i0 < end; i0 += chunk) {
      const int64_t nb = std::min(chunk, end - i0), ld = nb * ohw;
      for (int64_t j = 0; j < nb; ++j) {
        const float* xi = in + (i0 + j) * chw;
        const float* gyi = gy + (i0 + j) * cout_ * ohw;
        image_to_columns(xi, g, col + j * ohw, ld);
        for (int64_t c = 0; c < cout_; ++c)
          std::copy(gyi + c * ohw, gyi + (c + 1) * ohw, gyc + c * ld + j * ohw);
      }
      // dW += dY [Cout, ld] * col^T [ld, CKK]
      cpu::gemm(false, true, cout_, ckk, ld, 1.0f, gyc, col, 1.0f, dw.data());
      // dcol = W^T [CKK, Cout] * dY [Cout, ld]; col2im scatters it into each dx image.
      cpu::gemm(true, false, ckk, ld, cout_, 1.0f, w, gyc, 0.0f, dcol);
      for (int64_t j = 0; j < nb; ++j) {
        float* gxi = gx + (i0 + j) * chw;
        if (pointwise) {
          for (int64_t c = 0; c < cin_; ++c)
            std::copy(dcol + c * ld + j * ohw, dcol + c * ld + (j + 1) * ohw, gxi + c * ohw);
        } else {
          std::fill(gxi, gxi + chw, 0.0f);
          cpu::col2im(dcol + j * ohw, g, gxi, ld);
        }
      }
      if (bias_) {
        float* db = db_part[t].data();
        for (int64_t c = 0; c < cout_; ++c) {
          float s = 0.0f;
          for (int64_t p = 0; p < ld; ++p) s += gyc[c * ld + p];
          db[c] += s;
        }
      }
    }
  });
  add_partials(dw_part, weight_->grad.f32());
  if (bias_) add_partials(db_part, bias_->grad.f32());
  return dx;
}

// Per-sample squared-gradient sums (Param::sq_grad, for variance-based compression,
// Tsuzuku et al. 2018), a pass of its own so that dx and dW can come from oneDNN. Weight:
// the squared-operand GEMM (dY^2)(col^2)^T, i.e. the sum over samples AND output positions
// of (dy_p col_p)^2; the exact per-sample value also has the cross terms
// 2 sum_{p<q} dy_p col_p dy_q col_q, which this drops (an approximation that treats each
// output position as a sample). Bias: exact, sum_i (sum_p dy_ip)^2.
void Conv2d::accumulate_sq_grads(const Tensor& dy) {
  const cpu::ConvGeometry g = g_;
  const int64_t n = x_.dim(0), ohw = g.oh * g.ow, ckk = cin_ * kh_ * kw_, chw = cin_ * g.h * g.w;
  const float* in = x_.f32();
  const float* gy = dy.f32();
  const bool sq_w = weight_->sq_grad.defined(), sq_b = bias_ && bias_->sq_grad.defined();
  const int64_t chunk = images_per_gemm(g);
  const int threads = num_threads();
  std::vector<std::vector<float>> dw2_part(threads), db2_part(threads);
  parallel_for(n, 2, [&](int64_t begin, int64_t end) {
    const int t = static_cast<int>(omp_thread_id());
    if (sq_w) dw2_part[t].assign(cout_ * ckk, 0.0f);
    if (sq_b) db2_part[t].assign(cout_, 0.0f);
    // The squared operands of the weight GEMM; a bias-only pass needs neither.
    float* col2 = sq_w ? scratch(3, ckk * chunk * ohw) : nullptr;
    float* gyc2 = sq_w ? scratch(4, cout_ * chunk * ohw) : nullptr;
    for (int64_t i0 = begin; i0 < end; i0 += chunk) {
      const int64_t nb = std::min(chunk, end - i0), ld = nb * ohw;
      for (int64_t j = 0; j < nb; ++j) {
        const float* gyi = gy + (i0 + j) * cout_ * ohw;
        if (sq_b)
          for (int64_t c = 0; c < cout_; ++c) {
            float s = 0.0f;
            for (int64_t p = 0; p < ohw; ++p) s += gyi[c * ohw + p];
            db2_part[t][c] += s * s;
          }
        if (!sq_w) continue;
        image_to_columns(in + (i0 + j) * chw, g, col2 + j * ohw, ld);
        for (int64_t c = 0; c < cout_; ++c)
          for (int64_t p = 0; p < ohw; ++p)
            gyc2[c * ld + j * ohw + p] = gyi[c * ohw + p] * gyi[c * ohw + p];
      }
      if (!sq_w) continue;
      for (int64_t e = 0; e < ckk * ld; ++e) col2[e] *= col2[e];
      cpu::gemm(false, true, cout_, ckk, ld, 1.0f, gyc2, col2, 1.0f, dw2_part[t].data());
    }
  });
  if (sq_w) add_partials(dw2_part, weight_->sq_grad.f32());
  if (sq_b) add_partials(db2_part, bias_->sq_grad.f32());
}

}  // namespace st
