#include "layers/pooling.h"

#include <cfloat>

#include "core/layout.h"

namespace st {

Pool2d::Pool2d(const char* type, int kernel, int stride, int pad)
    : type_(type), kernel_(kernel), stride_(stride), pad_(pad) {
  ST_CHECK(kernel > 0 && stride > 0 && pad >= 0 && 2 * pad <= kernel, type,
           ": invalid kernel/stride/padding ", kernel, "/", stride, "/", pad);
}

std::string Pool2d::describe() const {
  return std::string(type_) + "(k" + std::to_string(kernel_) + ", s" + std::to_string(stride_) +
         ", p" + std::to_string(pad_) + ")";
}

PoolGeometry Pool2d::geometry(const Tensor& x) const {
  ST_CHECK(x.rank() == 4, describe(), ": expected a rank-4 input [N, C, H, W], got shape ",
           x.shape());
  PoolGeometry g{x.dim(0), x.dim(1), x.dim(2), x.dim(3), 0, 0, kernel_, stride_, pad_};
  g.oh = (g.h + 2 * pad_ - kernel_) / stride_ + 1;
  g.ow = (g.w + 2 * pad_ - kernel_) / stride_ + 1;
  ST_CHECK(g.oh > 0 && g.ow > 0, describe(), ": input shape ", x.shape(),
           " is smaller than the kernel");
  return g;
}

std::optional<TensorSpec> Pool2d::output_spec(const Tensor& x) const {
  const PoolGeometry g = geometry(x);
  return TensorSpec{Shape{g.n, g.c, g.oh, g.ow}};
}

Tensor MaxPool2d::forward_cpu(const Tensor& x) {
  g_ = geometry(x);
  const PoolGeometry g = g_;
  Tensor y = Tensor::empty(Shape{g.n, g.c, g.oh, g.ow});
  argmax_ = Tensor::empty(y.shape(), DType::I32);
  const float* in = x.f32();
  float* out = y.f32();
  int32_t* arg = argmax_.data<int32_t>();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const float* xp = in + plane * g.h * g.w;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float best = -FLT_MAX;
        int32_t best_i = -1;
        for (int ky = 0; ky < g.kernel; ++ky) {
          int64_t iy = oy * g.stride - g.pad + ky;
          if (iy < 0 || iy >= g.h) continue;
          for (int kx = 0; kx < g.kernel; ++kx) {
            int64_t ix = ox * g.stride - g.pad + kx;
            if (ix < 0 || ix >= g.w) continue;
            float v = xp[iy * g.w + ix];
            if (v > best || best_i < 0) {
              best = v;
              best_i = static_cast<int32_t>(iy * g.w + ix);
            }
          }
        }
        int64_t o = (plane * g.oh + oy) * g.ow + ox;
        out[o] = best;
        arg[o] = best_i;
      }
    }
  }
  return y;
}

Tensor MaxPool2d::backward_cpu(const Tensor& dy) {
  const PoolGeometry g = g_;
  expect_shape("gradient", Shape{g.n, g.c, g.oh, g.ow}, dy.shape());
  Tensor dx = Tensor::zeros(Shape{g.n, g.c, g.h, g.w});
  const float* gy = dy.f32();
  const int32_t* arg = argmax_.data<int32_t>();
  float* gx = dx.f32();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    float* gp = gx + plane * g.h * g.w;
    for (int64_t o = plane * g.oh * g.ow, e = o + g.oh * g.ow; o < e; ++o) gp[arg[o]] += gy[o];
  }
  return dx;
}

Tensor AvgPool2d::forward_cpu(const Tensor& x) {
  g_ = geometry(x);
  const PoolGeometry g = g_;
  Tensor y = Tensor::empty(Shape{g.n, g.c, g.oh, g.ow});
  const float* in = x.f32();
  float* out = y.f32();
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const float* xp = in + plane * g.h * g.w;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        float s = 0.0f;
        for (int ky = 0; ky < g.kernel; ++ky) {
          int64_t iy = oy * g.stride - g.pad + ky;
          if (iy < 0 || iy >= g.h) continue;
          for (int kx = 0; kx < g.kernel; ++kx) {
            int64_t ix = ox * g.stride - g.pad + kx;
            if (ix >= 0 && ix < g.w) s += xp[iy * g.w + ix];
          }
        }
        out[(plane * g.oh + oy) * g.ow + ox] = s * inv;
      }
    }
  }
  return y;
}

Tensor AvgPool2d::backward_cpu(const Tensor& dy) {
  const PoolGeometry g = g_;
  expect_shape("gradient", Shape{g.n, g.c, g.oh, g.ow}, dy.shape());
  Tensor dx = Tensor::zeros(Shape{g.n, g.c, g.h, g.w});
  const float* gy = dy.f32();
  float* gx = dx.f32();
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
    float* gp = gx + plane * g.h * g.w;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const float v = gy[(plane * g.oh + oy) * g.ow + ox] * inv;
        for (int ky = 0; ky < g.kernel; ++ky) {
          int64_t iy = oy * g.stride - g.pad + ky;
          if (iy < 0 || iy >= g.h) continue;
          for (int kx = 0; kx < g.kernel; ++kx) {
            int64_t ix = ox * g.stride - g.pad + kx;
            if (ix >= 0 && ix < g.w) gp[iy * g.w + ix] += v;
          }
        }
      }
    }
  }
  return dx;
}

// Either layout: channel_walk (core/layout.h) finds a channel's values, which are summed
// in the same order in both.
Tensor GlobalAvgPool2d::forward_cpu(const Tensor& x) {
  expect_rank(x, 4, "[N, C, H, W]");
  in_shape_ = x.shape();
  in_layout_ = x.layout();
  const int64_t planes = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
  Tensor y = Tensor::empty(Shape{x.dim(0), x.dim(1), 1, 1});
  const float* in = x.f32_in_layout();
  float* out = y.f32();
  const int64_t channels = x.dim(1);
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    const ChannelWalk at = channel_walk(in_layout_, p / channels, p % channels, channels, hw);
    float s = 0.0f;
    for (int64_t i = 0; i < hw; ++i) s += in[at.start + i * at.step];
    out[p] = s / static_cast<float>(hw);
  }
  return y;
}

Tensor GlobalAvgPool2d::backward_cpu(const Tensor& dy_in) {
  expect_shape("gradient", Shape{in_shape_[0], in_shape_[1], 1, 1}, dy_in.shape());
  const Tensor dy = to_plain(dy_in);
  const int64_t planes = in_shape_[0] * in_shape_[1], hw = in_shape_[2] * in_shape_[3];
  Tensor dx = Tensor::empty(in_shape_).with_layout(in_layout_);
  const float* gy = dy.f32();
  float* gx = dx.f32_in_layout();
  const int64_t channels = in_shape_[1];
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    const ChannelWalk at = channel_walk(in_layout_, p / channels, p % channels, channels, hw);
    const float v = gy[p] / static_cast<float>(hw);
    for (int64_t i = 0; i < hw; ++i) gx[at.start + i * at.step] = v;
  }
  return dx;
}

}  // namespace st
