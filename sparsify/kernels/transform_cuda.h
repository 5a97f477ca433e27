// CUDA kernels behind the transform family's element-wise passes (op_list.h,
// ST_BULK_TRANSFORM_OPS; bulk/transform_cuda.cu). Device pointers, the device's current
// stream. Built with the CUDA backend only.
#pragma once

#include <cstdint>

namespace st::quant {

// Ops::sq_magnitudes (ncoef complex coefficients) and Ops::pair_indices (m indices).
void sq_magnitudes_cuda(const float* coef, int64_t ncoef, float* mag);
void pair_indices_cuda(const int32_t* idx, int64_t m, int32_t* out);

}  // namespace st::quant
