// The pieces the transform passes work on (bulk::Ops::rfft, irfft, topk_abs_ranges, and
// the cuFFT kernels): plain structs below the device interface.
#pragma once

#include <cstdint>

namespace st::bulk {

// One real transform: bucket elements [begin, begin + len) <-> the half spectrum at
// [coef, coef + 2 (len/2 + 1)) of the coefficient buffer, interleaved (re, im).
struct FftPiece {
  int64_t begin = 0, len = 0, coef = 0;
};

// One range of Ops::topk_abs_ranges: the k largest |x| of [begin, end).
struct TopkRange {
  int64_t begin = 0, end = 0, k = 0;
};

}  // namespace st::bulk
