#include "sparsify/kernels/threshold_select_cpu.h"

#include <omp.h>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace st::select {

namespace {

// Appends the positions in [begin, end) with abs_key(x[i]) >= key, in order.
void scan(const float* x, int64_t begin, int64_t end, uint32_t key, std::vector<int32_t>& out) {
  int64_t i = begin;
#if defined(__AVX2__)
  // |x| bits and key are both < 2^31, so a signed compare against key - 1 is exact
  // (key = 0 becomes -1: everything passes, as it should).
  const __m256i below = _mm256_set1_epi32(static_cast<int32_t>(key) - 1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  auto hits = [&](int64_t j) {
    const __m256i v =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + j)), abs_mask);
    return _mm256_cmpgt_epi32(v, below);
  };
  for (; i + 32 <= end; i += 32) {
    const __m256i h0 = hits(i), h1 = hits(i + 8), h2 = hits(i + 16), h3 = hits(i + 24);
    const __m256i any = _mm256_or_si256(_mm256_or_si256(h0, h1), _mm256_or_si256(h2, h3));
    if (_mm256_testz_si256(any, any)) continue;  // the common case at d << 1
    const __m256i hs[4] = {h0, h1, h2, h3};
    for (int q = 0; q < 4; ++q) {
      unsigned m = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(hs[q])));
      while (m) {
        out.push_back(static_cast<int32_t>(i + 8 * q + __builtin_ctz(m)));
        m &= m - 1;
      }
    }
  }
#endif
  for (; i < end; ++i)
    if (part::abs_key(x[i]) >= key) out.push_back(static_cast<int32_t>(i));
}

}  // namespace

int64_t threshold_select_cpu(const float* x, part::Range owned, float tau, int64_t t,
                             std::vector<int32_t>& out) {
  out.clear();
  const int64_t n = owned.size();
  if (n <= 0) return 0;
  const uint32_t key = part::abs_key(tau);
  const int threads = n < (1 << 18) ? 1 : omp_get_max_threads();
  if (threads == 1) {
    scan(x, owned.begin, owned.end, key, out);
  } else {
    // Equal contiguous pieces, concatenated in thread order: deterministic.
    std::vector<std::vector<int32_t>> parts(threads);
#pragma omp parallel num_threads(threads)
    {
      const int r = omp_get_thread_num(), used = omp_get_num_threads();
      const int64_t b = owned.begin + n * r / used, e = owned.begin + n * (r + 1) / used;
      scan(x, b, e, key, parts[r]);
    }
    for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  }
  if (out.empty()) out.push_back(static_cast<int32_t>(part::fallback_index(owned, t)));
  return static_cast<int64_t>(out.size());
}

}  // namespace st::select
