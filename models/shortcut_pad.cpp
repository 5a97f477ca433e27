#include "models/shortcut_pad.h"

#include <cstring>

namespace st {

ShortcutPadA::ShortcutPadA(int64_t in_channels, int64_t out_channels, int stride)
    : cin_(in_channels),
      cout_(out_channels),
      front_((out_channels - in_channels) / 2),
      stride_(stride) {
  ST_CHECK(cin_ > 0 && cout_ >= cin_ && stride_ >= 1, "ShortcutPadA: invalid geometry ", cin_, "->",
           cout_, " stride ", stride_, " (needs out >= in > 0, stride >= 1)");
}

std::string ShortcutPadA::describe() const {
  return "ShortcutPadA(" + std::to_string(cin_) + "->" + std::to_string(cout_) + ", s" +
         std::to_string(stride_) + ")";
}

void ShortcutPadA::check_input(const Tensor& x) const {
  ST_CHECK(x.rank() == 4 && x.dim(1) == cin_, describe(), ": expected input shape [N, ", cin_,
           ", H, W], got ", x.shape());
}

Tensor ShortcutPadA::forward_cpu(const Tensor& x) {
  check_input(x);
  in_shape_ = x.shape();
  const int64_t n = x.dim(0), h = x.dim(2), w = x.dim(3), oh = out_extent(h), ow = out_extent(w);
  Tensor y = Tensor::empty(Shape{n, cout_, oh, ow});
  const float* in = x.f32();
  float* out = y.f32();
  const int64_t planes = n * cout_;
#pragma omp parallel for schedule(static) if (planes * oh * ow > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t img = p / cout_, c = p % cout_;
    const float* xi = in + img * cin_ * h * w;
    float* yp = out + p * oh * ow;
    if (math::shortcut_pad_source(c, 0, 0, front_, cin_, h, w, stride_) < 0) {
      std::memset(yp, 0, sizeof(float) * oh * ow);
      continue;
    }
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        yp[i * ow + j] = xi[math::shortcut_pad_source(c, i, j, front_, cin_, h, w, stride_)];
  }
  return y;
}

Tensor ShortcutPadA::backward_cpu(const Tensor& dy) {
  const int64_t n = in_shape_[0], h = in_shape_[2], w = in_shape_[3];
  const int64_t oh = out_extent(h), ow = out_extent(w);
  expect_shape("gradient", Shape{n, cout_, oh, ow}, dy.shape());
  // The forward is a selection, so dx is dy scattered back; skipped pixels and padded
  // channels receive nothing.
  Tensor dx = Tensor::zeros(in_shape_);
  const float* gy = dy.f32();
  float* gx = dx.f32();
  const int64_t planes = n * cout_;
#pragma omp parallel for schedule(static) if (planes * oh * ow > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t img = p / cout_, c = p % cout_;
    if (math::shortcut_pad_source(c, 0, 0, front_, cin_, h, w, stride_) < 0) continue;
    float* xi = gx + img * cin_ * h * w;
    const float* gp = gy + p * oh * ow;
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        xi[math::shortcut_pad_source(c, i, j, front_, cin_, h, w, stride_)] = gp[i * ow + j];
  }
  return dx;
}

}  // namespace st
