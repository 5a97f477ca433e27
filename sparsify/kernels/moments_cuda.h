// SIDCo's stage moments on a CUDA device (bulk/threshold_cuda.cu: exceed_moments).
// Device pointers, the device's current stream; waits for it. Built with CUDA only.
#pragma once

#include <cstdint>

#include "sparsify/sidco_moments.h"

namespace st::sidco {

// Moments of |x| over the elements with |x| > tau (tau < 0: all), in |x| units (count,
// sum, sum of squares, min); with `log_scale` > 0 also sum ln(|x| log_scale + 2.2e-16).
// Sums in double by atomics, so the last bits may differ from the CPU's block order.
Moments moments_cuda(const float* x, int64_t n, float tau, double log_scale = 0);

}  // namespace st::sidco
