// CUDA kernels behind the quantisation family of bulk::Ops (op_list.h,
// ST_BULK_QUANT_OPS; bulk/quant_cuda.cu forwards to them). Each evaluates the ST_HD formula
// the CPU implementation uses (sparsify/quant_math.h), so results are bit-exact where the
// interface's contract says so. All pointers are device memory on one device; the
// functions run on that device's current stream, and those returning host values wait for
// it. Built with the CUDA backend only.
#pragma once

#include <cstdint>

#include "sparsify/quant_math.h"
#include "sparsify/quant_spec.h"

namespace st::quant {

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

}  // namespace st::quant
