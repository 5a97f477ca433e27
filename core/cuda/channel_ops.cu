// CUDA versions of core/channel_ops.h on the current stream: the channel copy is a strided
// cudaMemcpy2DAsync; the scale and the per-plane dot product are thin kernels.
#include "core/channel_ops.h"
#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"

namespace st::cuda {

namespace {
__global__ void channel_scale_kernel(const float* x, const float* s, float* y, int64_t n,
                                     int64_t plane_size) {
  ST_GRID_STRIDE_LOOP(i, n) y[i] = x[i] * s[i / plane_size];
}

// One thread per (n, c) plane, summing in row-major order as the CPU loop does.
__global__ void channel_dot_kernel(const float* a, const float* b, float* out, int64_t planes,
                                   int64_t plane_size) {
  ST_GRID_STRIDE_LOOP(p, planes) {
    float sum = 0.0f;
    for (int64_t i = p * plane_size; i < (p + 1) * plane_size; ++i) sum += a[i] * b[i];
    out[p] = sum;
  }
}
}  // namespace

void copy_rows_2d(int dev, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                  size_t row_bytes, size_t rows) {
  if (row_bytes == 0 || rows == 0) return;
  DeviceGuard guard(dev);
  ST_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows,
                                  cudaMemcpyDeviceToDevice, current_stream(dev)));
}

void channel_scale(int dev, const float* x, const float* s, float* y, int64_t planes,
                   int64_t plane_size) {
  const int64_t n = planes * plane_size;
  if (n == 0) return;
  DeviceGuard guard(dev);
  channel_scale_kernel<<<grid_for(n), kBlock, 0, current_stream(dev)>>>(x, s, y, n, plane_size);
  ST_CUDA_CHECK_LAUNCH();
}

void channel_dot(int dev, const float* a, const float* b, float* out, int64_t planes,
                 int64_t plane_size) {
  if (planes == 0) return;
  DeviceGuard guard(dev);
  channel_dot_kernel<<<grid_for(planes), kBlock, 0, current_stream(dev)>>>(a, b, out, planes,
                                                                           plane_size);
  ST_CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
