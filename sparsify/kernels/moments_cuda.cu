// SIDCo's stage moments on the device (the threshold family's exceed_moments,
// bulk/threshold_cuda.cu).
#include "sparsify/kernels/moments_cuda.h"

#include <cstring>
#include <limits>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/storage.h"

namespace st::sidco {

namespace {

// Accumulators of moments_kernel in device memory.
struct DeviceMoments {
  unsigned long long count;
  double sum, sumsq, sumlog;
  unsigned int min_bits;  // non-negative floats order like their bit patterns
};

__global__ void moments_kernel(const float* x, int64_t n, float tau, double log_scale,
                               DeviceMoments* m) {
  unsigned long long c = 0;
  double s = 0, q = 0, l = 0;
  float mn = INFINITY;
  ST_GRID_STRIDE_LOOP(i, n) {
    const float v = fabsf(x[i]);
    if (v > tau) {
      ++c;
      s += v;
      q += static_cast<double>(v) * v;
      if (log_scale > 0) l += log(v * log_scale + 2.2e-16);
      mn = fminf(mn, v);
    }
  }
  // Warp reduction, then one atomic per warp.
  for (int off = 16; off > 0; off >>= 1) {
    c += __shfl_down_sync(0xffffffffu, c, off);
    s += __shfl_down_sync(0xffffffffu, s, off);
    q += __shfl_down_sync(0xffffffffu, q, off);
    l += __shfl_down_sync(0xffffffffu, l, off);
    mn = fminf(mn, __shfl_down_sync(0xffffffffu, mn, off));
  }
  if ((threadIdx.x & 31) == 0 && c > 0) {
    atomicAdd(&m->count, c);
    atomicAdd(&m->sum, s);
    atomicAdd(&m->sumsq, q);
    atomicAdd(&m->sumlog, l);
    atomicMin(&m->min_bits, __float_as_uint(mn));
  }
}

}  // namespace

Moments moments_cuda(const float* x, int64_t n, float tau, double log_scale) {
  Moments r;
  if (n <= 0) return r;
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t s = cuda::current_stream(dev);
  Storage acc(sizeof(DeviceMoments), Device::cuda(dev));
  DeviceMoments init{0, 0, 0, 0, 0x7F800000u};  // +inf
  cuda::copy_bytes(acc.data(), Device::cuda(dev), &init, Device::cpu(), sizeof(init));
  moments_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, s>>>(
      x, n, tau, log_scale, static_cast<DeviceMoments*>(acc.data()));
  ST_CUDA_CHECK_LAUNCH();
  ST_CUDA_CHECK(cudaStreamSynchronize(s));
  DeviceMoments m;
  cuda::copy_bytes(&m, Device::cpu(), acc.data(), Device::cuda(dev), sizeof(m));
  float mn;
  std::memcpy(&mn, &m.min_bits, 4);
  r.count = static_cast<int64_t>(m.count);
  r.sum = m.sum;
  r.sumsq = m.sumsq;
  r.sumlog = m.sumlog;
  r.min = m.count > 0 ? static_cast<double>(mn) : std::numeric_limits<double>::infinity();
  return r;
}

}  // namespace st::sidco
