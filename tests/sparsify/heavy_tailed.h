// Heavy-tailed bucket gradients for the exchange tests (conformance, CUDA hook): the
// conformance helper's generator, normal times |normal|, as gradients' magnitudes are,
// different on every rank, step and bucket.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "sparsify/testing/conformance.h"

namespace st::test {

inline Tensor gradient(int64_t n, int rank, int64_t t, int bucket) {
  return conformance::heavy_tailed_gradient(n, rank, t, bucket);
}

}  // namespace st::test
