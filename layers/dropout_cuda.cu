// Dropout on CUDA. The keep decision is math::dropout_keep(seed, stream, i, p), the
// same pure function of the element index the CPU uses, so both drop the same elements.
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "core/kernels/math.h"
#include "layers/dropout.h"

namespace st {

namespace {
__global__ void dropout_kernel(const float* in, float* out, int64_t n, uint64_t seed,
                               uint64_t stream, float p, float scale) {
  ST_GRID_STRIDE_LOOP(i, n) {
    out[i] = math::dropout_keep(seed, stream, static_cast<uint64_t>(i), p) ? in[i] * scale : 0.0f;
  }
}

void launch_dropout(const Tensor& in, Tensor& out, uint64_t seed, uint64_t stream, float p) {
  const int64_t n = in.numel();
  if (n == 0) return;
  const int dev = in.device().index;
  dropout_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, cuda::current_stream(dev)>>>(
      in.f32(), out.f32(), n, seed, stream, p, 1.0f / (1.0f - p));
  ST_CUDA_CHECK_LAUNCH();
}
}  // namespace

Tensor Dropout::forward_cuda(const Tensor& x) {
  cuda::expect_on(describe(), "input", x, x.device());
  shape_ = x.shape();
  if (!training_ || p_ == 0.0f) return x;
  cuda::DeviceGuard guard(x.device().index);
  const uint64_t stream = next_stream();
  Tensor y = Tensor::empty(x.shape(), DType::F32, x.device());
  launch_dropout(x, y, seed_, stream, p_);
  return y;
}

Tensor Dropout::backward_cuda(const Tensor& dy) {
  expect_shape("gradient", shape_, dy.shape());
  cuda::expect_on(describe(), "gradient", dy, dy.device());
  if (!training_ || p_ == 0.0f) return dy;
  cuda::DeviceGuard guard(dy.device().index);
  Tensor dx = Tensor::empty(dy.shape(), DType::F32, dy.device());
  launch_dropout(dy, dx, seed_, stream_, p_);
  return dx;
}

}  // namespace st
