#include "models/global_max_pool.h"

#include <limits>

namespace st {

void GlobalMaxPool2d::check_input(const Tensor& x) {
  expect_rank(x, 4, "[N, C, H, W]");
  const int64_t hw = x.dim(2) * x.dim(3);
  ST_CHECK(hw > 0 && hw <= std::numeric_limits<int32_t>::max(), describe(),
           ": plane size out of range in input ", x.shape());
  in_shape_ = x.shape();
}

Tensor GlobalMaxPool2d::forward_cpu(const Tensor& x) {
  check_input(x);
  const int64_t planes = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
  argmax_ = Tensor::empty(Shape{planes}, DType::I32);
  Tensor y = Tensor::empty(Shape{x.dim(0), x.dim(1), 1, 1});
  const float* in = x.f32();
  float* out = y.f32();
  int32_t* arg = argmax_.data<int32_t>();
#pragma omp parallel for schedule(static) if (planes * hw > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    arg[p] = math::plane_argmax(in + p * hw, hw);
    out[p] = in[p * hw + arg[p]];
  }
  return y;
}

Tensor GlobalMaxPool2d::backward_cpu(const Tensor& dy) {
  expect_shape("gradient", Shape{in_shape_[0], in_shape_[1], 1, 1}, dy.shape());
  const int64_t planes = in_shape_[0] * in_shape_[1], hw = in_shape_[2] * in_shape_[3];
  Tensor dx = Tensor::zeros(in_shape_);
  const float* gy = dy.f32();
  const int32_t* arg = argmax_.data<int32_t>();
  float* gx = dx.f32();
  for (int64_t p = 0; p < planes; ++p) gx[p * hw + arg[p]] = gy[p];
  return dx;
}

}  // namespace st
