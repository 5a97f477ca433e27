// The 16-bit conversions of core/kernels/half.h on a CUDA device, queued on the current
// stream of the device that owns `out`: the operand copies and results of the
// mixed-precision layers (layers/conv2d_cuda.cu). CUDA builds only.
#pragma once

#include <cstdint>

#include "core/kernels/half.h"

namespace st::cuda {

// out[i] = format `p` bits of in[i] * scale (p is BF16 or F16); as cpu::pack_half.
void pack_half(Precision p, const float* in, float scale, uint16_t* out, int64_t n);
// out[i] = the float value of in[i].
void unpack_half(Precision p, const uint16_t* in, float* out, int64_t n);
// out[i] += the float value of in[i]; as cpu::add_half.
void add_half(Precision p, const uint16_t* in, float* out, int64_t n);

}  // namespace st::cuda
