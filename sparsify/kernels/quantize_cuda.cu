#include <cmath>
#include <cstring>
#include <limits>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/rng.h"
#include "core/storage.h"
#include "sparsify/kernels/quantize_cuda.h"

namespace st {

namespace {

// One block per chunk: the chunk's L2 norm (QSGD).
__global__ void chunk_norm(const float* x, int64_t n, int64_t chunk, float* out) {
  __shared__ float part[cuda::kBlock];
  const int64_t b = static_cast<int64_t>(blockIdx.x) * chunk, e = min(n, b + chunk);
  float acc = 0.0f;
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) acc += x[i] * x[i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sqrtf(part[0]);
}

// One block per chunk: TernGrad's clipped scale from the chunk's max |x|, sum and sum of
// squares (quant::terngrad_scale, the CPU's formula).
__global__ void terngrad_scale_kernel(const float* x, int64_t n, int64_t chunk, float clip,
                                      float* out) {
  __shared__ float part_max[cuda::kBlock];
  __shared__ double part_sum[cuda::kBlock], part_sq[cuda::kBlock];
  const int64_t b = static_cast<int64_t>(blockIdx.x) * chunk, e = min(n, b + chunk);
  float mx = 0.0f;
  double sum = 0, sq = 0;
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
    const float v = x[i];
    mx = fmaxf(mx, fabsf(v));
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  part_max[threadIdx.x] = mx;
  part_sum[threadIdx.x] = sum;
  part_sq[threadIdx.x] = sq;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      part_max[threadIdx.x] = fmaxf(part_max[threadIdx.x], part_max[threadIdx.x + s]);
      part_sum[threadIdx.x] += part_sum[threadIdx.x + s];
      part_sq[threadIdx.x] += part_sq[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[blockIdx.x] = quant::terngrad_scale(part_max[0], part_sum[0], part_sq[0], e - b, clip);
}

__global__ void qsgd_kernel(const float* x, int64_t n, int64_t chunk, int32_t s, uint64_t seed,
                            uint64_t stream, const float* norms, int32_t* level, float* value) {
  ST_GRID_STRIDE_LOOP(i, n) {
    const float norm = norms[i / chunk];
    const int32_t l = quant::qsgd_level(x[i], norm, s, philox_uniform(seed, stream, i));
    level[i] = l;
    value[i] = quant::qsgd_value(l, norm, s);
  }
}

__global__ void terngrad_kernel(const float* x, int64_t n, int64_t chunk, uint64_t seed,
                                uint64_t stream, const float* scales, int32_t* level,
                                float* value) {
  ST_GRID_STRIDE_LOOP(i, n) {
    const float scale = scales[i / chunk];
    const int32_t l = quant::terngrad_level(x[i], scale, philox_uniform(seed, stream, i));
    level[i] = l;
    value[i] = quant::terngrad_value(l, scale);
  }
}

__global__ void range_float_kernel(const float* v, int64_t n, quant::RangeFloat f, uint32_t* codes,
                                   float* value) {
  ST_GRID_STRIDE_LOOP(i, n) {
    const uint32_t c = quant::range_float_encode(f, v[i]);
    codes[i] = c;
    value[i] = quant::range_float_decode(f, c);
  }
}

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

int64_t chunks_of(int64_t n, int64_t chunk) {
  return (n + chunk - 1) / chunk;
}

}  // namespace

namespace quant {

void qsgd_cuda(const float* x, int64_t n, int64_t chunk, int32_t levels, uint64_t seed,
               uint64_t stream, float* norms, int32_t* level, float* value) {
  if (n <= 0) return;
  if (chunk <= 0) chunk = n;
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t s = cuda::current_stream(dev);
  chunk_norm<<<static_cast<unsigned>(chunks_of(n, chunk)), cuda::kBlock, 0, s>>>(x, n, chunk,
                                                                                 norms);
  ST_CUDA_CHECK_LAUNCH();
  qsgd_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, s>>>(x, n, chunk, levels, seed, stream, norms,
                                                         level, value);
  ST_CUDA_CHECK_LAUNCH();
}

void terngrad_cuda(const float* x, int64_t n, int64_t chunk, float clip, uint64_t seed,
                   uint64_t stream, float* scales, int32_t* level, float* value) {
  if (n <= 0) return;
  if (chunk <= 0) chunk = n;
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t s = cuda::current_stream(dev);
  terngrad_scale_kernel<<<static_cast<unsigned>(chunks_of(n, chunk)), cuda::kBlock, 0, s>>>(
      x, n, chunk, clip, scales);
  ST_CUDA_CHECK_LAUNCH();
  terngrad_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, s>>>(x, n, chunk, seed, stream, scales,
                                                             level, value);
  ST_CUDA_CHECK_LAUNCH();
}

void range_float_cuda(const float* v, int64_t n, RangeFloat f, uint32_t* codes, float* value) {
  if (n <= 0) return;
  const int dev = cuda::device_of(v);
  cuda::DeviceGuard guard(dev);
  range_float_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, cuda::current_stream(dev)>>>(
      v, n, f, codes, value);
  ST_CUDA_CHECK_LAUNCH();
}

}  // namespace quant

namespace sidco {

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

Estimate estimate_cuda(const float* x, int64_t n, Variant variant, int stages, double delta) {
  return estimate_with(n, variant, stages, delta, [x, n](float tau, double log_scale, bool) {
    return moments_cuda(x, n, tau, log_scale);
  });
}

}  // namespace sidco

}  // namespace st
