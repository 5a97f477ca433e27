// GPU twins of the CPU selection kernels (sparsify/kernels/select_cpu.h), on CUB:
// threshold selection by DeviceSelect::If over a counting iterator, counts by
// DeviceReduce, exact Top-k by a stable descending DeviceRadixSort of the magnitude bits
// (this CCCL has no DeviceTopK), so ties go to the lower index exactly as on the CPU.
// All pointers are device memory on one CUDA device; work runs on that device's current
// stream, and each call waits for its (host-visible) result. Built with the CUDA backend.
#pragma once

#include <cstdint>

namespace st::select {

// Count of |x| > tau (`strict`) or |x| >= tau.
int64_t count_abs_cuda(const float* x, int64_t n, float tau, bool strict);

// Positions with |x| > tau (`strict`) or >= tau, ascending, into `out` (room for n);
// returns their count.
int64_t abs_threshold_cuda(const float* x, int64_t n, float tau, bool strict, int32_t* out);

// The k positions with the largest |x| (ties to the lower index), ascending, into `out`
// (room for k); returns the k-th largest magnitude, as select::topk_abs does.
float topk_abs_cuda(const float* x, int64_t n, int64_t k, int32_t* out);

}  // namespace st::select
