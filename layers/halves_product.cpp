#include "layers/halves_product.h"

namespace st {

Shape HalvesProduct::output_shape(const Tensor& x) const {
  ST_CHECK(x.dtype() == DType::F32 && x.rank() == 2 && x.dim(1) % 2 == 0, describe(),
           ": expected a float [N, 2d] input (two vectors side by side), got ", x.str());
  return Shape{x.dim(0), x.dim(1) / 2};
}

std::optional<TensorSpec> HalvesProduct::output_spec(const Tensor& x) const {
  return TensorSpec{output_shape(x)};
}

Tensor HalvesProduct::forward_cpu(const Tensor& x) {
  const Shape out = output_shape(x);
  const int64_t n = out[0], d = out[1];
  x_ = x;
  Tensor y = Tensor::empty(out);
  const float* in = x.f32();
  float* o = y.f32();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < d; ++j) o[r * d + j] = in[r * 2 * d + j] * in[r * 2 * d + d + j];
  return y;
}

// d(a * b)/da = b and d(a * b)/db = a: each half's gradient is dy times the other half.
Tensor HalvesProduct::backward_cpu(const Tensor& dy) {
  ST_CHECK(x_.defined(), describe(), ": backward without a forward");
  expect_shape("gradient", output_shape(x_), dy.shape());
  const int64_t n = dy.dim(0), d = dy.dim(1);
  Tensor dx = Tensor::empty(x_.shape());
  const float* in = x_.f32();
  const float* g = dy.f32();
  float* o = dx.f32();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < d; ++j) {
      o[r * 2 * d + j] = g[r * d + j] * in[r * 2 * d + d + j];
      o[r * 2 * d + d + j] = g[r * d + j] * in[r * 2 * d + j];
    }
  }
  return dx;
}

}  // namespace st
