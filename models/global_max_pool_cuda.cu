// GlobalMaxPool2d on CUDA: one thread per (n, c) plane runs the CPU's arg-max loop
// (math::plane_argmax), so both backends pick the same element; backward scatters dy
// to it (each plane owns one input element, so no atomics).
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "models/global_max_pool.h"

namespace st {

namespace {

__global__ void global_max_forward_kernel(const float* x, float* y, int32_t* arg, int64_t planes,
                                          int64_t hw) {
  ST_GRID_STRIDE_LOOP(p, planes) {
    const int32_t a = math::plane_argmax(x + p * hw, hw);
    arg[p] = a;
    y[p] = x[p * hw + a];
  }
}

__global__ void global_max_backward_kernel(const float* dy, const int32_t* arg, float* dx,
                                           int64_t planes, int64_t hw) {
  ST_GRID_STRIDE_LOOP(p, planes) dx[p * hw + arg[p]] = dy[p];
}

}  // namespace

Tensor GlobalMaxPool2d::forward_cuda(const Tensor& x) {
  check_input(x);
  cuda::expect_on(describe(), "input", x, x.device());
  const int64_t planes = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
  const int dev = x.device().index;
  cuda::DeviceGuard guard(dev);
  argmax_ = Tensor::empty(Shape{planes}, DType::I32, x.device());
  Tensor y = Tensor::empty(Shape{x.dim(0), x.dim(1), 1, 1}, DType::F32, x.device());
  if (planes > 0) {
    global_max_forward_kernel<<<cuda::grid_for(planes), cuda::kBlock, 0,
                                cuda::current_stream(dev)>>>(x.f32(), y.f32(),
                                                             argmax_.data<int32_t>(), planes, hw);
    ST_CUDA_CHECK_LAUNCH();
  }
  return y;
}

Tensor GlobalMaxPool2d::backward_cuda(const Tensor& dy) {
  expect_shape("gradient", Shape{in_shape_[0], in_shape_[1], 1, 1}, dy.shape());
  cuda::expect_on(describe(), "gradient", dy, argmax_.device());
  const int64_t planes = in_shape_[0] * in_shape_[1], hw = in_shape_[2] * in_shape_[3];
  const int dev = dy.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor dx = Tensor::zeros(in_shape_, DType::F32, dy.device());
  if (planes > 0) {
    global_max_backward_kernel<<<cuda::grid_for(planes), cuda::kBlock, 0,
                                 cuda::current_stream(dev)>>>(dy.f32(), argmax_.data<int32_t>(),
                                                              dx.f32(), planes, hw);
    ST_CUDA_CHECK_LAUNCH();
  }
  return dx;
}

}  // namespace st
