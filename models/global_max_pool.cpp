#include "models/global_max_pool.h"

namespace st {

Tensor GlobalMaxPool2d::forward_cpu(const Tensor& x) {
  expect_rank(x, 4, "[N, C, H, W]");
  ST_CHECK(x.dim(2) * x.dim(3) > 0, describe(), ": empty planes in input ", x.shape());
  in_shape_ = x.shape();
  const int64_t planes = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
  argmax_.assign(planes, 0);
  Tensor y = Tensor::empty(Shape{x.dim(0), x.dim(1), 1, 1});
  const float* in = x.f32();
  float* out = y.f32();
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = in + p * hw;
    int64_t best = 0;
    for (int64_t i = 1; i < hw; ++i)
      if (xp[i] > xp[best]) best = i;
    argmax_[p] = best;
    out[p] = xp[best];
  }
  return y;
}

Tensor GlobalMaxPool2d::backward_cpu(const Tensor& dy) {
  expect_shape("gradient", Shape{in_shape_[0], in_shape_[1], 1, 1}, dy.shape());
  const int64_t planes = in_shape_[0] * in_shape_[1], hw = in_shape_[2] * in_shape_[3];
  Tensor dx = Tensor::zeros(in_shape_);
  const float* gy = dy.f32();
  float* gx = dx.f32();
  for (int64_t p = 0; p < planes; ++p) gx[p * hw + argmax_[p]] = gy[p];
  return dx;
}

}  // namespace st
