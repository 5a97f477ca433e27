// HalvesProduct on CUDA: one thread per output element, the CPU's products exactly.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "layers/halves_product.h"

namespace st {

namespace {
__global__ void halves_product_kernel(const float* x, float* y, int64_t n, int64_t d) {
  ST_GRID_STRIDE_LOOP(i, n * d) {
    const int64_t r = i / d, j = i % d;
    y[i] = x[r * 2 * d + j] * x[r * 2 * d + d + j];
  }
}

__global__ void halves_product_backward_kernel(const float* x, const float* dy, float* dx,
                                               int64_t n, int64_t d) {
  ST_GRID_STRIDE_LOOP(i, n * d) {
    const int64_t r = i / d, j = i % d;
    dx[r * 2 * d + j] = dy[i] * x[r * 2 * d + d + j];
    dx[r * 2 * d + d + j] = dy[i] * x[r * 2 * d + j];
  }
}
}  // namespace

Tensor HalvesProduct::forward_cuda(const Tensor& x) {
  cuda::expect_on(describe(), "input", x, x.device());
  const Shape out = output_shape(x);
  x_ = x;
  cuda::DeviceGuard guard(x.device().index);
  Tensor y = Tensor::empty(out, DType::F32, x.device());
  const int64_t total = out.numel();
  if (total == 0) return y;
  halves_product_kernel<<<cuda::grid_for(total), cuda::kBlock, 0,
                          cuda::current_stream(x.device().index)>>>(x.f32(), y.f32(), out[0],
                                                                     out[1]);
  ST_CUDA_CHECK_LAUNCH();
  return y;
}

Tensor HalvesProduct::backward_cuda(const Tensor& dy) {
  ST_CHECK(x_.defined(), describe(), ": backward without a forward");
  expect_shape("gradient", output_shape(x_), dy.shape());
  cuda::expect_on(describe(), "gradient", dy, x_.device());
  cuda::DeviceGuard guard(dy.device().index);
  Tensor dx = Tensor::empty(x_.shape(), DType::F32, dy.device());
  const int64_t total = dy.numel();
  if (total == 0) return dx;
  halves_product_backward_kernel<<<cuda::grid_for(total), cuda::kBlock, 0,
                                   cuda::current_stream(dy.device().index)>>>(
      x_.f32(), dy.f32(), dx.f32(), dy.dim(0), dy.dim(1));
  ST_CUDA_CHECK_LAUNCH();
  return dx;
}

}  // namespace st
