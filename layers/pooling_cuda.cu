// Pooling on CUDA.
// - MaxPool2d: own kernels, so the arg-max rule is exactly the CPU's (first maximum in
//   window order, padding never wins) and backward is a deterministic gather (each input
//   element sums the outputs that chose it, in output order) instead of atomics.
// - AvgPool2d: cuDNN pooling, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, which divides
//   by kernel*kernel like the CPU (PyTorch's count_include_pad=True).
// - GlobalAvgPool2d: one warp per (n, c) plane, then a broadcast kernel for backward.
#include <cfloat>

#include "core/cuda/check.h"
#include "core/cuda/cudnn_desc.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "layers/pooling.h"

namespace st {

namespace {

__global__ void maxpool_forward_kernel(const float* x, float* y, int32_t* arg, PoolGeometry g) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  ST_GRID_STRIDE_LOOP(o, total) {
    const int64_t ox = o % g.ow, oy = (o / g.ow) % g.oh, plane = o / (g.ow * g.oh);
    const float* xp = x + plane * g.h * g.w;
    float best = -FLT_MAX;
    int32_t best_i = -1;
    for (int ky = 0; ky < g.kernel; ++ky) {
      const int64_t iy = oy * g.stride - g.pad + ky;
      if (iy < 0 || iy >= g.h) continue;
      for (int kx = 0; kx < g.kernel; ++kx) {
        const int64_t ix = ox * g.stride - g.pad + kx;
        if (ix < 0 || ix >= g.w) continue;
        const float v = xp[iy * g.w + ix];
        if (v > best || best_i < 0) {
          best = v;
          best_i = static_cast<int32_t>(iy * g.w + ix);
        }
      }
    }
    y[o] = best;
    arg[o] = best_i;
  }
}

// One thread per input element: visits the outputs whose window covers it, in the
// order the CPU scatters them, and sums those that picked it.
__global__ void maxpool_backward_kernel(const float* dy, const int32_t* arg, float* dx,
                                        PoolGeometry g) {
  const int64_t total = g.n * g.c * g.h * g.w;
  ST_GRID_STRIDE_LOOP(i, total) {
    const int64_t ix = i % g.w, iy = (i / g.w) % g.h, plane = i / (g.w * g.h);
    const int32_t self = static_cast<int32_t>(iy * g.w + ix);
    // Outputs oy with oy*stride - pad <= iy <= oy*stride - pad + kernel - 1.
    const int64_t oy0 = max(int64_t{0}, (iy + g.pad - g.kernel + g.stride) / g.stride);
    const int64_t oy1 = min(g.oh - 1, (iy + g.pad) / g.stride);
    const int64_t ox0 = max(int64_t{0}, (ix + g.pad - g.kernel + g.stride) / g.stride);
    const int64_t ox1 = min(g.ow - 1, (ix + g.pad) / g.stride);
    float s = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t o = (plane * g.oh + oy) * g.ow + ox;
        if (arg[o] == self) s += dy[o];
      }
    }
    dx[i] = s;
  }
}

// A warp per plane: lanes stride over the plane, then a shuffle reduction.
__global__ void global_avg_forward_kernel(const float* x, float* y, int64_t planes, int64_t hw) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t p = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; p < planes;
       p += warps) {
    const float* xp = x + p * hw;
    float s = 0.0f;
    for (int64_t i = lane; i < hw; i += 32) s += xp[i];
    for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) y[p] = s / static_cast<float>(hw);
  }
}

__global__ void global_avg_backward_kernel(const float* dy, float* dx, int64_t planes, int64_t hw) {
  ST_GRID_STRIDE_LOOP(i, planes * hw) dx[i] = dy[i / hw] / static_cast<float>(hw);
}

// AvgPool2d through cuDNN; descriptors are cheap to build, so each call makes its own.
struct AvgPoolDescs {
  cuda::TensorDesc x, y;
  cuda::PoolingDesc pool;
  AvgPoolDescs(const PoolGeometry& g) {
    x.set(g.n, g.c, g.h, g.w);
    y.set(g.n, g.c, g.oh, g.ow);
    pool.set(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, g.kernel, g.stride, g.pad);
  }
};

}  // namespace

Tensor MaxPool2d::forward_cuda(const Tensor& x) {
  g_ = geometry(x);
  cuda::expect_on(describe(), "input", x, x.device());
  const PoolGeometry g = g_;
  const int dev = x.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor y = Tensor::empty(Shape{g.n, g.c, g.oh, g.ow}, DType::F32, x.device());
  argmax_ = Tensor::empty(y.shape(), DType::I32, x.device());
  const int64_t total = y.numel();
  if (total > 0) {
    maxpool_forward_kernel<<<cuda::grid_for(total), cuda::kBlock, 0, cuda::current_stream(dev)>>>(
        x.f32(), y.f32(), argmax_.data<int32_t>(), g);
    ST_CUDA_CHECK_LAUNCH();
  }
  return y;
}

Tensor MaxPool2d::backward_cuda(const Tensor& dy) {
  const PoolGeometry g = g_;
  expect_shape("gradient", Shape{g.n, g.c, g.oh, g.ow}, dy.shape());
  cuda::expect_on(describe(), "gradient", dy, argmax_.device());
  const int dev = dy.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor dx = Tensor::empty(Shape{g.n, g.c, g.h, g.w}, DType::F32, dy.device());
  const int64_t total = dx.numel();
  if (total > 0) {
    maxpool_backward_kernel<<<cuda::grid_for(total), cuda::kBlock, 0, cuda::current_stream(dev)>>>(
        dy.f32(), argmax_.data<int32_t>(), dx.f32(), g);
    ST_CUDA_CHECK_LAUNCH();
  }
  return dx;
}

Tensor AvgPool2d::forward_cuda(const Tensor& x) {
  g_ = geometry(x);
  cuda::expect_on(describe(), "input", x, x.device());
  const int dev = x.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor y = Tensor::empty(Shape{g_.n, g_.c, g_.oh, g_.ow}, DType::F32, x.device());
  AvgPoolDescs d(g_);
  const float one = 1.0f, zero = 0.0f;
  ST_CUDNN_CHECK(cudnnPoolingForward(cuda::context(dev).cudnn(), d.pool.get(), &one, d.x.get(),
                                     x.f32(), &zero, d.y.get(), y.f32()));
  x_ = x;
  y_ = y;
  return y;
}

Tensor AvgPool2d::backward_cuda(const Tensor& dy) {
  const PoolGeometry g = g_;
  expect_shape("gradient", Shape{g.n, g.c, g.oh, g.ow}, dy.shape());
  cuda::expect_on(describe(), "gradient", dy, x_.device());
  const int dev = dy.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor dx = Tensor::empty(x_.shape(), DType::F32, dy.device());
  AvgPoolDescs d(g);
  const float one = 1.0f, zero = 0.0f;
  ST_CUDNN_CHECK(cudnnPoolingBackward(cuda::context(dev).cudnn(), d.pool.get(), &one, d.y.get(),
                                      y_.f32(), d.y.get(), dy.f32(), d.x.get(), x_.f32(), &zero,
                                      d.x.get(), dx.f32()));
  return dx;
}

Tensor GlobalAvgPool2d::forward_cuda(const Tensor& x) {
  expect_rank(x, 4, "[N, C, H, W]");
  cuda::expect_on(describe(), "input", x, x.device());
  in_shape_ = x.shape();
  const int64_t planes = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
  const int dev = x.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor y = Tensor::empty(Shape{x.dim(0), x.dim(1), 1, 1}, DType::F32, x.device());
  if (planes > 0 && hw > 0) {
    global_avg_forward_kernel<<<cuda::grid_for(planes * 32), cuda::kBlock, 0,
                                cuda::current_stream(dev)>>>(x.f32(), y.f32(), planes, hw);
    ST_CUDA_CHECK_LAUNCH();
  }
  return y;
}

Tensor GlobalAvgPool2d::backward_cuda(const Tensor& dy) {
  expect_shape("gradient", Shape{in_shape_[0], in_shape_[1], 1, 1}, dy.shape());
  cuda::expect_on(describe(), "gradient", dy, dy.device());
  const int64_t planes = in_shape_[0] * in_shape_[1], hw = in_shape_[2] * in_shape_[3];
  const int dev = dy.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor dx = Tensor::empty(in_shape_, DType::F32, dy.device());
  if (planes * hw > 0) {
    global_avg_backward_kernel<<<cuda::grid_for(planes * hw), cuda::kBlock, 0,
                                 cuda::current_stream(dev)>>>(dy.f32(), dx.f32(), planes, hw);
    ST_CUDA_CHECK_LAUNCH();
  }
  return dx;
}

}  // namespace st
