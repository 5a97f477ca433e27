// bfloat16 rounding as integer operations on the float's bits, shared by the CPU
// (core/kernels/half.cpp) and the CUDA kernels (core/cuda/half.cu), so a bf16 operand is
// the same bits on both devices. (fp16 uses each device's IEEE conversion instruction:
// F16C on the CPU, __float2half_rn on the GPU; both round to nearest, ties to even.)
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace st::half_math {

ST_HD uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
#endif
}

ST_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float v;
  std::memcpy(&v, &u, 4);
  return v;
#endif
}

ST_HD uint16_t float_to_bf16(float v) {
  uint32_t u = float_bits(v);
  // NaN stays a (quiet) NaN; truncation alone could turn it into an infinity.
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  // Round to nearest, ties to even: add half an ulp of the kept part (minus one when the
  // kept part is even) and truncate. Values past bf16's largest finite become +-inf.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

ST_HD float bf16_to_float(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

}  // namespace st::half_math
