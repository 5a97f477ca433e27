// ReLU on CUDA: a grid-stride kernel around the shared per-element formula
// (core/kernels/math.h), so CPU and GPU compute the same thing bit for bit.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "core/kernels/math.h"
#include "layers/relu.h"

namespace st {

namespace {
__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) y[i] = math::relu(x[i]);
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) dx[i] = math::relu_backward(y[i], dy[i]);
}
}  // namespace

Tensor ReLU::forward_cuda(const Tensor& x) {
  cuda::expect_on(describe(), "input", x, x.device());
  const int dev = x.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const int64_t n = x.numel();
  if (n > 0) {
    relu_forward_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, cuda::current_stream(dev)>>>(
        x.f32(), y.f32(), n);
    ST_CUDA_CHECK_LAUNCH();
  }
  y_ = y;
  return y;
}

Tensor ReLU::backward_cuda(const Tensor& dy) {
  expect_shape("gradient", y_.shape(), dy.shape());
  cuda::expect_on(describe(), "gradient", dy, y_.device());
  const int dev = dy.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor dx = Tensor::empty(dy.shape(), DType::F32, dy.device());
  const int64_t n = dy.numel();
  if (n > 0) {
    relu_backward_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, cuda::current_stream(dev)>>>(
        y_.f32(), dy.f32(), dx.f32(), n);
    ST_CUDA_CHECK_LAUNCH();
  }
  return dx;
}

}  // namespace st
