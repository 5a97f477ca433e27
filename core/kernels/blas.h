// Row-major single-precision GEMM on the CPU: oneDNN's sgemm where the build has oneDNN,
// else OpenBLAS. Inside an OpenMP parallel region both run single-threaded, so callers
// may split work across images and call gemm from each thread.
#pragma once

#include <cstdint>

namespace st::cpu {

// C[m x n] = alpha * op(A) * op(B) + beta * C, all row-major with natural leading dims.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

// Same with explicit leading dimensions.
void gemm_ld(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc);

}  // namespace st::cpu
