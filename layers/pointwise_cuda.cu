// The point-wise layers on CUDA: one grid-stride kernel per direction around the functor
// the CPU loop calls (core/kernels/pointwise_ops.h), instantiated for every activation.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "layers/pointwise.h"

namespace st {

namespace {
template <class Op>
__global__ void pointwise_forward_kernel(const float* x, float* y, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) y[i] = Op::forward(x[i]);
}

template <class Op>
__global__ void pointwise_backward_kernel(const float* saved, const float* dy, float* dx,
                                          int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) dx[i] = Op::backward(saved[i], dy[i]);
}
}  // namespace

template <class Op>
Tensor Pointwise<Op>::forward_cuda(const Tensor& x) {
  cuda::expect_on(describe(), "input", x, x.device());
  const int dev = x.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  const int64_t n = x.numel();
  if (n > 0) {
    pointwise_forward_kernel<Op>
        <<<cuda::grid_for(n), cuda::kBlock, 0, cuda::current_stream(dev)>>>(x.f32(), y.f32(), n);
    ST_CUDA_CHECK_LAUNCH();
  }
  saved_ = Op::kBackwardFromOutput ? y : x;
  return y;
}

template <class Op>
Tensor Pointwise<Op>::backward_cuda(const Tensor& dy) {
  expect_shape("gradient", saved_.shape(), dy.shape());
  cuda::expect_on(describe(), "gradient", dy, saved_.device());
  const int dev = dy.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor dx = Tensor::empty(dy.shape(), DType::F32, dy.device());
  const int64_t n = dy.numel();
  if (n > 0) {
    pointwise_backward_kernel<Op>
        <<<cuda::grid_for(n), cuda::kBlock, 0, cuda::current_stream(dev)>>>(saved_.f32(), dy.f32(),
                                                                            dx.f32(), n);
    ST_CUDA_CHECK_LAUNCH();
  }
  return dx;
}

#define ST_POINTWISE_INSTANTIATE_CUDA(Name, Op)                       \
  template Tensor Pointwise<math::Op>::forward_cuda(const Tensor& x); \
  template Tensor Pointwise<math::Op>::backward_cuda(const Tensor& dy);
ST_POINTWISE_OPS(ST_POINTWISE_INSTANTIATE_CUDA)
#undef ST_POINTWISE_INSTANTIATE_CUDA

}  // namespace st
