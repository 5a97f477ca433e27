// ShortcutPadA on CUDA: one thread per output element through the CPU's index formula
// (math::shortcut_pad_source). Backward zeroes dx and scatters each kept element back;
// every input element receives at most one value, so no atomics are needed.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "models/shortcut_pad.h"

namespace st {

namespace {

struct PadGeometry {
  int64_t n, cin, cout, front, h, w, oh, ow;
  int stride;
};

__global__ void shortcut_pad_forward_kernel(const float* x, float* y, PadGeometry g) {
  ST_GRID_STRIDE_LOOP(o, g.n * g.cout * g.oh * g.ow) {
    const int64_t j = o % g.ow, i = (o / g.ow) % g.oh, c = (o / (g.ow * g.oh)) % g.cout;
    const int64_t img = o / (g.ow * g.oh * g.cout);
    const int64_t src = math::shortcut_pad_source(c, i, j, g.front, g.cin, g.h, g.w, g.stride);
    y[o] = src < 0 ? 0.0f : x[img * g.cin * g.h * g.w + src];
  }
}

__global__ void shortcut_pad_backward_kernel(const float* dy, float* dx, PadGeometry g) {
  ST_GRID_STRIDE_LOOP(o, g.n * g.cout * g.oh * g.ow) {
    const int64_t j = o % g.ow, i = (o / g.ow) % g.oh, c = (o / (g.ow * g.oh)) % g.cout;
    const int64_t img = o / (g.ow * g.oh * g.cout);
    const int64_t src = math::shortcut_pad_source(c, i, j, g.front, g.cin, g.h, g.w, g.stride);
    if (src >= 0) dx[img * g.cin * g.h * g.w + src] = dy[o];
  }
}

}  // namespace

Tensor ShortcutPadA::forward_cuda(const Tensor& x) {
  check_input(x);
  cuda::expect_on(describe(), "input", x, x.device());
  in_shape_ = x.shape();
  const PadGeometry g{
      x.dim(0), cin_, cout_, front_, x.dim(2), x.dim(3), out_extent(x.dim(2)), out_extent(x.dim(3)),
      stride_};
  const int dev = x.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor y = Tensor::empty(Shape{g.n, g.cout, g.oh, g.ow}, DType::F32, x.device());
  const int64_t total = y.numel();
  if (total > 0) {
    shortcut_pad_forward_kernel<<<cuda::grid_for(total), cuda::kBlock, 0,
                                  cuda::current_stream(dev)>>>(x.f32(), y.f32(), g);
    ST_CUDA_CHECK_LAUNCH();
  }
  return y;
}

Tensor ShortcutPadA::backward_cuda(const Tensor& dy) {
  const PadGeometry g{in_shape_[0],
                      cin_,
                      cout_,
                      front_,
                      in_shape_[2],
                      in_shape_[3],
                      out_extent(in_shape_[2]),
                      out_extent(in_shape_[3]),
                      stride_};
  expect_shape("gradient", Shape{g.n, g.cout, g.oh, g.ow}, dy.shape());
  cuda::expect_on(describe(), "gradient", dy, dy.device());
  const int dev = dy.device().index;
  cuda::DeviceGuard guard(dev);
  Tensor dx = Tensor::zeros(in_shape_, DType::F32, dy.device());
  const int64_t total = dy.numel();
  if (total > 0) {
    shortcut_pad_backward_kernel<<<cuda::grid_for(total), cuda::kBlock, 0,
                                   cuda::current_stream(dev)>>>(dy.f32(), dx.f32(), g);
    ST_CUDA_CHECK_LAUNCH();
  }
  return dx;
}

}  // namespace st
