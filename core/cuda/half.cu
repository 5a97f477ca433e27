#include "core/cuda/half.h"

#include <cuda_fp16.h>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/error.h"
#include "core/kernels/half_math.h"

namespace st::cuda {

namespace {

__device__ __forceinline__ uint16_t to_bits(bool bf16, float v) {
  return bf16 ? half_math::float_to_bf16(v) : __half_as_ushort(__float2half_rn(v));
}

__device__ __forceinline__ float from_bits(bool bf16, uint16_t h) {
  return bf16 ? half_math::bf16_to_float(h) : __half2float(__ushort_as_half(h));
}

__global__ void pack_kernel(bool bf16, const float* in, float scale, uint16_t* out, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) out[i] = to_bits(bf16, in[i] * scale);
}

__global__ void unpack_kernel(bool bf16, const uint16_t* in, float* out, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) out[i] = from_bits(bf16, in[i]);
}

__global__ void add_kernel(bool bf16, const uint16_t* in, float* out, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) out[i] += from_bits(bf16, in[i]);
}

// The device and stream of `out`, after checking that `p` is a 16-bit format.
int device_for(Precision p, const void* out, const char* op) {
  ST_CHECK(p != Precision::F32, op, ": fp32 is not a 16-bit format");
  return device_of(out);
}

}  // namespace

void pack_half(Precision p, const float* in, float scale, uint16_t* out, int64_t n) {
  if (n == 0) return;
  const int dev = device_for(p, out, "pack_half");
  DeviceGuard guard(dev);
  pack_kernel<<<grid_for(n), kBlock, 0, current_stream(dev)>>>(p == Precision::BF16, in, scale, out,
                                                               n);
  ST_CUDA_CHECK_LAUNCH();
}

void unpack_half(Precision p, const uint16_t* in, float* out, int64_t n) {
  if (n == 0) return;
  const int dev = device_for(p, out, "unpack_half");
  DeviceGuard guard(dev);
  unpack_kernel<<<grid_for(n), kBlock, 0, current_stream(dev)>>>(p == Precision::BF16, in, out, n);
  ST_CUDA_CHECK_LAUNCH();
}

void add_half(Precision p, const uint16_t* in, float* out, int64_t n) {
  if (n == 0) return;
  const int dev = device_for(p, out, "add_half");
  DeviceGuard guard(dev);
  add_kernel<<<grid_for(n), kBlock, 0, current_stream(dev)>>>(p == Precision::BF16, in, out, n);
  ST_CUDA_CHECK_LAUNCH();
}

}  // namespace st::cuda
