// The CUDA bodies of VGC's passes (sparsify/vgc.cpp): the variance test and the
// (index, value) wire words. Device pointers on one device; each runs on that device's
// current stream, and test_cuda waits for it (its count sizes the output). Built
// with CUDA only.
#pragma once

#include <cstdint>

namespace st::vgc {

// The test over n elements; `out` has room for n positions. Returns the count (host);
// *max_sent = the largest |x| sent (0 when none). aux or grad is null.
int64_t test_cuda(const float* x, const float* aux, const float* grad, int64_t n, float inv_batch,
                  float alpha, float zeta, float tau, float* v, int32_t* out, float* max_sent);
// packed: the bits of `scale`, then m words; values their decoding.
void pack_cuda(const float* x, const int32_t* idx, int64_t m, float scale, int index_bits,
               uint32_t* packed, float* values);
// From count >= 1 words (the scale, then count - 1 entries).
void unpack_cuda(const uint32_t* words, int64_t count, int index_bits, int32_t* idx, float* values);

}  // namespace st::vgc
