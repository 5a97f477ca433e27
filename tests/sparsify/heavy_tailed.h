// Heavy-tailed bucket gradients for the exchange tests (conformance, CUDA hook): normal
// times |normal|, as gradients' magnitudes are, different on every rank, step and bucket.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/rng.h"
#include "core/tensor.h"

namespace st::test {

inline Tensor gradient(int64_t n, int rank, int64_t t, int bucket) {
  Rng rng(1000003ull * rank + 7919ull * t + bucket);
  Tensor g = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) g.f32()[i] = rng.normal() * std::abs(rng.normal()) * 0.01f;
  return g;
}

}  // namespace st::test
