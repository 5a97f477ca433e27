// The argument checks of the bulk::Ops calls whose contracts (bulk_ops.h) both
// implementations enforce alike, written once: each throws one line naming the call and
// the sizes. Host code only; the CPU (cpu_ops*.cpp) and CUDA (cuda_ops*.cu) implementations
// call them before touching memory.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "sparsify/bulk/bulk_ops.h"

namespace st::bulk::check {

inline void range(const char* op, int64_t size, part::Range r) {
  ST_CHECK(r.begin >= 0 && r.begin <= r.end && r.end <= size, "bulk::Ops::", op, ": range [",
           r.begin, ", ", r.end, ") outside a buffer of ", size, " elements");
}

// exceed_compact's position map covers the range.
inline void positions_cover(const Buffer* pos, part::Range r) {
  ST_CHECK(!pos || pos->size() >= r.end, "bulk::Ops::exceed_compact: ", pos ? pos->size() : 0,
           " positions for a range ending at ", r.end);
}

inline void scale_words(int64_t groups, int64_t scales_at, const Buffer& words) {
  ST_CHECK(scales_at >= 0 && scales_at + groups <= words.size(), "bulk::Ops::dequantize: ", groups,
           " scales from ", scales_at, " of ", words.size(), " words");
}

// The words n codes of `bits` bits fill from `at` (pack_bits, unpack_bits); returns how many.
inline int64_t packed_words(const char* op, int bits, int64_t n, int64_t at, const Buffer& words) {
  ST_CHECK(bits >= 1 && bits <= 32, "bulk::Ops::", op, ": ", bits, " bits per code");
  const int64_t nw = (n * bits + 31) / 32;
  ST_CHECK(n >= 0 && at >= 0 && at + nw <= words.size(), "bulk::Ops::", op, ": ", n, " codes of ",
           bits, " bits from word ", at, " need ", nw, " words of ", words.size());
  return nw;
}

// Every piece's real range and half spectrum inside their buffers (rfft, irfft).
inline void fft_pieces(const char* op, const std::vector<FftPiece>& pieces, int64_t real_size,
                       int64_t coef_size) {
  for (const FftPiece& p : pieces)
    ST_CHECK(
        p.begin >= 0 && p.begin + p.len <= real_size && p.coef + 2 * (p.len / 2 + 1) <= coef_size,
        "bulk::Ops::", op, ": piece [", p.begin, ", +", p.len, ") with coefficients at ", p.coef,
        " outside ", real_size, " / ", coef_size);
}

// Ascending, disjoint ranges with 1 <= k <= length inside a buffer of `size`; returns the
// total of their k.
inline int64_t topk_ranges(const std::vector<TopkRange>& ranges, int64_t size) {
  int64_t total = 0, last = 0;
  for (const TopkRange& r : ranges) {
    ST_CHECK(r.begin >= last && r.end <= size && r.k >= 1 && r.k <= r.end - r.begin,
             "bulk::Ops::topk_abs_ranges: range [", r.begin, ", ", r.end, ") with k = ", r.k,
             " in a buffer of ", size);
    last = r.end;
    total += r.k;
  }
  return total;
}

inline void gemm_shapes(int64_t m, int64_t n, int64_t k, const Buffer& A, int64_t a_off,
                        const Buffer& B, int64_t b_off, const Buffer& C, int64_t c_off) {
  ST_CHECK(a_off >= 0 && a_off + m * k <= A.size() && b_off >= 0 && b_off + k * n <= B.size() &&
               c_off >= 0 && c_off + m * n <= C.size(),
           "bulk::Ops::gemm: ", m, "x", k, " times ", k, "x", n, " outside buffers of ", A.size(),
           ", ", B.size(), ", ", C.size());
}

}  // namespace st::bulk::check
