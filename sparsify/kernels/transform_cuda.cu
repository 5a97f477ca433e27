// The transform family's element-wise kernels (bulk/transform_cuda.cu; op_list.h,
// ST_BULK_TRANSFORM_OPS); the FFTs themselves are cuFFT's (kernels/fft_cuda.*).
#include "sparsify/kernels/transform_cuda.h"

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"

namespace st::quant {

namespace {

__global__ void sq_magnitudes_kernel(const float* coef, int64_t nc, float* mag) {
  ST_GRID_STRIDE_LOOP(j, nc) {
    const float re = coef[2 * j], im = coef[2 * j + 1];
    mag[j] = __fadd_rn(__fmul_rn(re, re), __fmul_rn(im, im));  // no FMA: the CPU's bits
  }
}

__global__ void pair_indices_kernel(const int32_t* idx, int64_t m, int32_t* out) {
  ST_GRID_STRIDE_LOOP(j, m) {
    out[2 * j] = 2 * idx[j];
    out[2 * j + 1] = 2 * idx[j] + 1;
  }
}

}  // namespace

void sq_magnitudes_cuda(const float* coef, int64_t ncoef, float* mag) {
  if (ncoef <= 0) return;
  cuda::OnDeviceOf on(coef);
  sq_magnitudes_kernel<<<cuda::grid_for(ncoef), cuda::kBlock, 0, on.stream>>>(coef, ncoef, mag);
  ST_CUDA_CHECK_LAUNCH();
}

void pair_indices_cuda(const int32_t* idx, int64_t m, int32_t* out) {
  if (m <= 0) return;
  cuda::OnDeviceOf on(idx);
  pair_indices_kernel<<<cuda::grid_for(m), cuda::kBlock, 0, on.stream>>>(idx, m, out);
  ST_CUDA_CHECK_LAUNCH();
}

}  // namespace st::quant
