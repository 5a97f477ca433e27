// 16-bit floating-point formats for mixed-precision training: bfloat16 (8 exponent bits,
// 8 significand bits: fp32's range, 2^-8 relative rounding) and IEEE fp16 (5 exponent
// bits, 11 significand bits: largest finite 65504, hence loss scaling). Values are
// converted with round-to-nearest-even; fp16 conversion uses the CPU's F16C instructions.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace st {

// The arithmetic a layer's matrix products use (--precision), or a wire format
// (--comm-dtype). F32 is plain single precision.
enum class Precision { F32, BF16, F16 };

// "fp32", "bf16", "fp16".
const char* precision_name(Precision p);
// Parses those names; throws naming `flag` and the valid values otherwise.
Precision parse_precision(const std::string& name, const char* flag);

namespace cpu {

uint16_t float_to_bf16(float v);
float bf16_to_float(uint16_t h);
uint16_t float_to_f16(float v);
float f16_to_float(uint16_t h);

// out[i] = in[i] rounded to format `p` and widened back to float (in == out allowed).
// F32 copies. fp16 overflow gives +-inf, as an fp16 tensor would hold.
void round_to(Precision p, const float* in, float* out, int64_t n);
// A float tensor whose values are `t`'s rounded to `p` (t itself for F32).
Tensor rounded(const Tensor& t, Precision p);

// `t` (float32 or bfloat16) as `dtype`, in the same layout and on the same device: `t`
// itself when it already is, else a converted copy (round to nearest even). Host memory:
// a CPU tensor, or an emulated device's inside its stream's task.
Tensor to_dtype(const Tensor& t, DType dtype);

// out[i] = format `p` bits of in[i] * scale (p is BF16 or F16).
void pack_half(Precision p, const float* in, float scale, uint16_t* out, int64_t n);
// out[i] += the float value of in[i].
void add_half(Precision p, const uint16_t* in, float* out, int64_t n);

}  // namespace cpu
}  // namespace st
