// CPU selection kernels shared by the sparsifiers. All are OpenMP-parallel, single or
// two streaming passes, and deterministic: the result does not depend on the thread
// count (per-thread pieces are concatenated in thread order, ties break by index).
#pragma once

#include <cstdint>
#include <vector>

namespace st::select {

// Exact top-k by magnitude: the k positions with the largest |x|, ties to the lower
// index; `out` is sorted by position. Two passes: a histogram of the magnitude's top
// bits (|x| as IEEE bits orders like |x|), then a compaction that keeps every element
// above the boundary bin and the candidates inside it; the boundary is resolved on the
// candidates only. Returns the k-th largest magnitude (the threshold).
float topk_abs(const float* x, int64_t n, int64_t k, std::vector<int32_t>& out);

// Positions in [begin, end) with |x| >= tau (or > tau when `strict`), in order.
// One streaming pass.
void abs_threshold(const float* x, int64_t begin, int64_t end, float tau, bool strict,
                   std::vector<int32_t>& out);

// Count of |x| >= tau in [begin, end) (one pass, no output).
int64_t count_abs_ge(const float* x, int64_t begin, int64_t end, float tau);

}  // namespace st::select
