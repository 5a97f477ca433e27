// CUDA versions of the device-generic ops in core/ops.h. Each runs on the calling
// thread's current stream for the device that owns the data.
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/ops.h"

namespace st::cuda {

namespace {
__global__ void add_kernel(float* dst, const float* src, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) dst[i] += src[i];
}

__global__ void scale_kernel(float* x, float alpha, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) x[i] *= alpha;
}

struct SquareToDouble {
  __host__ __device__ double operator()(float v) const { return static_cast<double>(v) * v; }
};
}  // namespace

void add_inplace(float* dst, const float* src, int64_t n) {
  if (n == 0) return;
  const int dev = device_of(dst);
  DeviceGuard guard(dev);
  add_kernel<<<grid_for(n), kBlock, 0, current_stream(dev)>>>(dst, src, n);
  ST_CUDA_CHECK_LAUNCH();
}

void scale_inplace(float* x, float alpha, int64_t n) {
  if (n == 0) return;
  const int dev = device_of(x);
  DeviceGuard guard(dev);
  scale_kernel<<<grid_for(n), kBlock, 0, current_stream(dev)>>>(x, alpha, n);
  ST_CUDA_CHECK_LAUNCH();
}

double sum_squares(const float* x, int64_t n) {
  if (n == 0) return 0.0;
  const int dev = device_of(x);
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  // Accumulated in double, like the CPU path; CUB's reduction order is fixed, so the
  // result is the same from run to run.
  size_t temp_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
      nullptr, temp_bytes, x, static_cast<double*>(nullptr), n, ::cuda::std::plus<double>{},
      SquareToDouble{}, 0.0, stream));
  const size_t out_offset = (temp_bytes + 255) / 256 * 256;
  Storage scratch(out_offset + sizeof(double), Device::cuda(dev));
  void* temp = scratch.data();
  double* out = reinterpret_cast<double*>(static_cast<char*>(scratch.data()) + out_offset);
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
      temp, temp_bytes, x, out, n, ::cuda::std::plus<double>{}, SquareToDouble{}, 0.0, stream));
  double result = 0.0;
  copy_bytes(&result, Device::cpu(), out, Device::cuda(dev), sizeof(double));
  return result;
}

}  // namespace st::cuda
