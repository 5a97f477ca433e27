// CUDA versions of the device-generic ops in core/ops.h. Each runs on the calling
// thread's current stream for the device that owns the data.
#include <algorithm>
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

// *out = sum x^2 (device memory), queued on `stream`. Accumulated in double, like the CPU
// path; CUB's reduction order is fixed, so the result is the same from run to run.
void sum_squares_into(const float* x, int64_t n, double* out, int dev, cudaStream_t stream) {
  size_t temp_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
      nullptr, temp_bytes, x, out, n, ::cuda::std::plus<double>{}, SquareToDouble{}, 0.0, stream));
  // The scratch block goes back to the cache on this stream, so it is not reused before
  // the reduction has run. (A null pointer would make the second call a size query.)
  Storage scratch(std::max<size_t>(temp_bytes, 1), Device::cuda(dev));
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(scratch.data(), temp_bytes, x, out, n,
                                                   ::cuda::std::plus<double>{}, SquareToDouble{},
                                                   0.0, stream));
}

}  // namespace

void copy_async(int dev, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(dev);
  ST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, current_stream(dev)));
}

void add_inplace(int dev, float* dst, const float* src, int64_t n) {
  if (n == 0) return;
  DeviceGuard guard(dev);
  add_kernel<<<grid_for(n), kBlock, 0, current_stream(dev)>>>(dst, src, n);
  ST_CUDA_CHECK_LAUNCH();
}

void scale_inplace(int dev, float* x, float alpha, int64_t n) {
  if (n == 0) return;
  DeviceGuard guard(dev);
  scale_kernel<<<grid_for(n), kBlock, 0, current_stream(dev)>>>(x, alpha, n);
  ST_CUDA_CHECK_LAUNCH();
}

std::vector<double> sum_squares_each(const std::vector<const float*>& xs,
                                     const std::vector<int64_t>& ns, int dev) {
  ST_CHECK(xs.size() == ns.size(), "sum_squares_each: ", xs.size(), " pointers, ", ns.size(),
           " sizes");
  std::vector<double> result(xs.size(), 0.0);
  if (xs.empty()) return result;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev);
  Storage out(xs.size() * sizeof(double), Device::cuda(dev));
  double* slots = static_cast<double*>(out.data());
  ST_CUDA_CHECK(cudaMemsetAsync(slots, 0, xs.size() * sizeof(double), stream));
  for (size_t i = 0; i < xs.size(); ++i)
    if (ns[i] > 0) sum_squares_into(xs[i], ns[i], slots + i, dev, stream);
  copy_bytes(result.data(), Device::cpu(), slots, Device::cuda(dev), xs.size() * sizeof(double));
  return result;
}

double sum_squares(int dev, const float* x, int64_t n) {
  if (n == 0) return 0.0;
  return sum_squares_each({x}, {n}, dev).front();
}

}  // namespace st::cuda
