#include "layers/pointwise.h"

#include "core/kernels/half.h"
#include "core/kernels/half_math.h"
#include "core/layout.h"

namespace st {

namespace {
using half_math::bf16_to_float, half_math::float_to_bf16;

// out[i] = f(a[i], b[i]) over float32 or bfloat16 elements.
template <class F>
void elementwise(const Tensor& a, const Tensor* b, Tensor& out, const F& f) {
  const int64_t n = out.numel();
  if (out.dtype() == DType::BF16) {
    const uint16_t* pa = a.bf16_in_layout();
    const uint16_t* pb = b ? b->bf16_in_layout() : nullptr;
    uint16_t* o = out.bf16_in_layout();
#pragma omp parallel for simd if (n > 32768) schedule(static)
    for (int64_t i = 0; i < n; ++i)
      o[i] = float_to_bf16(f(bf16_to_float(pa[i]), pb ? bf16_to_float(pb[i]) : 0.0f));
    return;
  }
  const float* pa = a.f32_in_layout();
  const float* pb = b ? b->f32_in_layout() : nullptr;
  float* o = out.f32_in_layout();
#pragma omp parallel for simd if (n > 32768) schedule(static)
  for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i], pb ? pb[i] : 0.0f);
}
}  // namespace

// Elementwise, so any layout: the output keeps the input's layout and float format.
template <class Op>
Tensor Pointwise<Op>::forward_cpu(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype()).with_layout(x.layout());
  elementwise(x, nullptr, y, [](float v, float) { return Op::forward(v); });
  saved_ = Op::kBackwardFromOutput ? y : x;
  return y;
}

template <class Op>
Tensor Pointwise<Op>::backward_cpu(const Tensor& dy_in) {
  expect_shape("gradient", saved_.shape(), dy_in.shape());
  const Tensor dy = cpu::to_dtype(to_layout(dy_in, saved_.layout()), saved_.dtype());
  Tensor dx = Tensor::empty(dy.shape(), dy.dtype()).with_layout(dy.layout());
  elementwise(saved_, &dy, dx, [](float s, float g) { return Op::backward(s, g); });
  return dx;
}

#define ST_POINTWISE_INSTANTIATE(Name, Op) template class Pointwise<math::Op>;
ST_POINTWISE_OPS(ST_POINTWISE_INSTANTIATE)
#undef ST_POINTWISE_INSTANTIATE

}  // namespace st
