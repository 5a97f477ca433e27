// Constants and bit casts the CpuOps files share (core_cpu.cpp and the <family>_cpu.cpp).
#pragma once

#include <cstdint>
#include <cstring>

namespace st::bulk::cpu_detail {

// Element-wise loops go parallel above this size (the hook's loops always used it).
inline constexpr int64_t kParallelMin = 65536;
// Sums (statistics, VGC's test, TernGrad / EF-signSGD scales) run over fixed blocks of
// this many elements, joined in block order: the bits do not depend on the thread count.
inline constexpr int64_t kSumBlock = 1 << 16;

inline uint32_t float_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

inline float bits_float(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

}  // namespace st::bulk::cpu_detail
