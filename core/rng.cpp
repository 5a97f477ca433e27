#include "core/rng.h"

#include <cmath>

namespace st {

float Rng::normal() {
  float u1 = uniform();
  float u2 = uniform();
  if (u1 < 1e-7f) u1 = 1e-7f;
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
}

uint32_t Rng::below(uint32_t n) {
  Philox4 r = philox_block(seed_, stream_ | (1ull << 62), counter_++);
  uint64_t wide = (static_cast<uint64_t>(r.v[0]) << 32) | r.v[1];
  return static_cast<uint32_t>(wide % n);
}

}  // namespace st
