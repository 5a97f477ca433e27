#include "models/shortcut_pad.h"

#include <cstring>
#include <type_traits>

#include "core/kernels/half.h"
#include "core/layout.h"

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

int64_t ShortcutPadA::source(Layout layout, int64_t img, int64_t c, int64_t i, int64_t j) const {
  const int64_t hw = in_shape_[2] * in_shape_[3];
  const int64_t at =
      math::shortcut_pad_source(c, i, j, front_, cin_, in_shape_[2], in_shape_[3], stride_);
  if (at < 0) return -1;
  const ChannelWalk walk = channel_walk(layout, img, at / hw, cin_, hw);
  return walk.start + (at % hw) * walk.step;
}

// Either layout and either float format: channel_walk (core/layout.h) places an output
// plane, source() finds each value's origin. A padded channel is all zeros in forward and
// receives nothing in backward.
std::optional<TensorSpec> ShortcutPadA::output_spec(const Tensor& x) const {
  check_input(x);
  const TensorSpec in = taken_spec(x);
  return TensorSpec{Shape{x.dim(0), cout_, out_extent(x.dim(2)), out_extent(x.dim(3))}, in.dtype,
                    in.layout};
}

Tensor ShortcutPadA::forward_cpu(const Tensor& x) {
  check_input(x);
  in_shape_ = x.shape();
  in_layout_ = x.layout();
  in_dtype_ = x.dtype();
  const int64_t n = x.dim(0), oh = out_extent(x.dim(2)), ow = out_extent(x.dim(3)), ohw = oh * ow;
  Tensor y = Tensor::empty(Shape{n, cout_, oh, ow}, x.dtype()).with_layout(x.layout());
  const int64_t planes = n * cout_;
  const auto select = [&](const auto* in, auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
#pragma omp parallel for schedule(static) if (planes * ohw > 32768)
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t img = p / cout_, c = p % cout_;
      const ChannelWalk to = channel_walk(in_layout_, img, c, cout_, ohw);
      const bool padded = source(in_layout_, img, c, 0, 0) < 0;
      for (int64_t k = 0; k < ohw; ++k)
        out[to.start + k * to.step] =
            padded ? T(0) : in[source(in_layout_, img, c, k / ow, k % ow)];
    }
  };
  if (x.dtype() == DType::BF16)
    select(x.bf16_in_layout(), y.bf16_in_layout());
  else
    select(x.f32_in_layout(), y.f32_in_layout());
  return y;
}

Tensor ShortcutPadA::backward_cpu(const Tensor& dy_in) {
  const int64_t n = in_shape_[0], oh = out_extent(in_shape_[2]), ow = out_extent(in_shape_[3]);
  const int64_t ohw = oh * ow;
  expect_shape("gradient", Shape{n, cout_, oh, ow}, dy_in.shape());
  const Tensor dy = cpu::to_dtype(to_layout(dy_in, in_layout_), in_dtype_);
  // The forward is a selection, so dx is dy scattered back; skipped pixels and padded
  // channels receive nothing.
  Tensor dx = Tensor::zeros(in_shape_, in_dtype_).with_layout(in_layout_);
  const int64_t planes = n * cout_;
  const auto scatter = [&](const auto* gy, auto* gx) {
#pragma omp parallel for schedule(static) if (planes * ohw > 32768)
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t img = p / cout_, c = p % cout_;
      if (source(in_layout_, img, c, 0, 0) < 0) continue;
      const ChannelWalk from = channel_walk(in_layout_, img, c, cout_, ohw);
      for (int64_t k = 0; k < ohw; ++k)
        gx[source(in_layout_, img, c, k / ow, k % ow)] = gy[from.start + k * from.step];
    }
  };
  if (in_dtype_ == DType::BF16)
    scatter(dy.bf16_in_layout(), dx.bf16_in_layout());
  else
    scatter(dy.f32_in_layout(), dx.f32_in_layout());
  return dx;
}

}  // namespace st
