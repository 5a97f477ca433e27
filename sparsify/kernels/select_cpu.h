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

// Positions in [begin, end) whose |x| as IEEE bits (the sign bit cleared) is >= key, in
// increasing order, into idx (replaced) and, when vals is given, x at those positions into
// *vals: one pass over x, per-thread chunks joined by one prefix sum and copy.
void compact_abs_ge(const float* x, int64_t begin, int64_t end, uint32_t key,
                    std::vector<int32_t>& idx, std::vector<float>* vals = nullptr);

// Count of |x| >= tau in [begin, end) (one pass, no output).
int64_t count_abs_ge(const float* x, int64_t begin, int64_t end, float tau);

}  // namespace st::select

// --- Baseline helpers: one streaming, vectorisable pass each. The methods reach these
// sums through bulk::Ops (count_abs, stats); mean_std and abs_mean_max stay as the
// references the tests hold Gaussian-k's and RedSync's bulk::Ops sums to, bit for bit. ---
namespace st::select {

// Count of |x| > tau (`strict`) or |x| >= tau in [begin, end).
int64_t count_abs(const float* x, int64_t begin, int64_t end, float tau, bool strict);

// Mean and unbiased variance of x, accumulated in double (Gaussian-k).
struct Moments {
  double mean = 0;
  double variance = 0;
};
Moments mean_std(const float* x, int64_t n);

// Mean and maximum of |x| (RedSync).
struct AbsMeanMax {
  double mean = 0;
  float max = 0;
};
AbsMeanMax abs_mean_max(const float* x, int64_t n);

// Exact top-k by magnitude restricted to `candidates` (positions in x, ascending): the
// k candidates with the largest |x|, ties to the lower index, `out` sorted by position.
// Returns the k-th largest candidate magnitude (DGC's hierarchical top-k).
float topk_abs_among(const float* x, const std::vector<int32_t>& candidates, int64_t k,
                     std::vector<int32_t>& out);

}  // namespace st::select
