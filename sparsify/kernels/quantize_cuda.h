// CUDA kernels behind the quantisation passes of bulk::Ops (sparsify/bulk/bulk_ops.h,
// "Quantisation, transforms, dense algebra"), so a CUDA implementation forwards to them,
// plus SIDCo's stage moments. Each kernel evaluates the ST_HD formula the CPU
// implementation uses (sparsify/quant_math.h), so results are bit-exact where the
// interface's contract says so. All pointers are device memory on one device; the
// functions run on that device's current stream, and those returning host values wait for
// it. Built with the CUDA backend only.
#pragma once

#include <cstdint>

#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/sidco_fit.h"

namespace st::quant {

// Ops::dgc_momentum on n elements.
void dgc_momentum_cuda(float m, const float* x, int64_t n, float* u, float* v, float* seen);
// Ops::vgc_test: `out` has room for n positions; returns the count (host), *max_sent the
// largest |x| sent (0 when none). aux or grad is null.
int64_t vgc_test_cuda(const float* x, const float* aux, const float* grad, int64_t n,
                      float inv_batch, float alpha, float zeta, float tau, float* v, int32_t* out,
                      float* max_sent);
// Ops::vgc_pack (packed: m + 1 words) and Ops::vgc_unpack (count >= 1 words).
void vgc_pack_cuda(const float* x, const int32_t* idx, int64_t m, float scale, int index_bits,
                   uint32_t* packed, float* values);
void vgc_unpack_cuda(const uint32_t* words, int64_t count, int index_bits, int32_t* idx,
                     float* values);
// Ops::quantize: scales (q.groups(n)), codes and values (n). Group sums in double, one
// block per group.
void quantize_cuda(const bulk::QuantSpec& q, const float* x, int64_t n, float* scales,
                   uint32_t* codes, float* values);
// Ops::dequantize: the group scales as float bits at scale_words[0, q.groups(n)).
void dequantize_cuda(const bulk::QuantSpec& q, const uint32_t* codes, int64_t n,
                     const uint32_t* scale_words, float* values);
// Ops::pack_bits into words[0, ceil(n bits / 32)) and Ops::unpack_bits.
void pack_bits_cuda(const uint32_t* codes, int64_t n, int bits, uint32_t* words);
void unpack_bits_cuda(const uint32_t* words, int64_t n, int bits, uint32_t* codes);
// Ops::range_float_quantize (codes and values) and Ops::range_float_dequantize.
void range_float_cuda(const float* v, int64_t n, RangeFloat f, uint32_t* codes, float* value);
void range_float_decode_cuda(const uint32_t* codes, int64_t n, RangeFloat f, float* value);
// Ops::abs_min_nonzero over n elements (host value).
float abs_min_nonzero_cuda(const float* x, int64_t n);
// Ops::sq_magnitudes (ncoef complex coefficients) and Ops::pair_indices (m indices).
void sq_magnitudes_cuda(const float* coef, int64_t ncoef, float* mag);
void pair_indices_cuda(const int32_t* idx, int64_t m, int32_t* out);

}  // namespace st::quant

namespace st::sidco {

// Moments of |x| over the elements with |x| > tau (tau < 0: all), in |x| units (count,
// sum, sum of squares, min); with `log_scale` > 0 also sum ln(|x| log_scale + 2.2e-16).
// Sums in double by atomics, so the last bits may differ from the CPU's block order.
Moments moments_cuda(const float* x, int64_t n, float tau, double log_scale = 0);
// The multi-stage estimate with one full pass per stage (no compaction on the GPU).
Estimate estimate_cuda(const float* x, int64_t n, Variant variant, int stages, double delta);

}  // namespace st::sidco
