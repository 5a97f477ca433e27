// CudaOps: low rank (op_list.h, ST_BULK_LOW_RANK_OPS): PowerSGD's products on cuBLAS.
#include <algorithm>
#include <climits>

#include "core/cuda/check.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"

namespace st::bulk {

namespace {

int blas_int(int64_t v, const char* what) {
  ST_CHECK(v >= 0 && v <= INT_MAX, "bulk::Ops::gemm: ", what, " = ", v,
           " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

// Row-major C (m x n) is column-major C^T (n x m), so the product is issued as
// C^T = op(B)^T op(A)^T with the operands swapped; a row-major matrix stored r x c is a
// column-major c x r one with leading dimension c.
void CudaOps::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const Buffer& A, int64_t a_off, const Buffer& B, int64_t b_off, float beta,
                   Buffer& C, int64_t c_off) {
  check::gemm_shapes(m, n, k, A, a_off, B, b_off, C, c_off);
  if (m == 0 || n == 0) return;
  const int mi = blas_int(m, "m"), ni = blas_int(n, "n"), ki = blas_int(k, "k");
  cuda::DeviceGuard guard(dev());
  ST_CUBLAS_CHECK(cublasSgemm(cuda::context(dev()).cublas(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, ni, mi, ki, &alpha,
                              f32(B) + b_off, std::max(1, trans_b ? ki : ni), f32(A) + a_off,
                              std::max(1, trans_a ? mi : ki), &beta, f32(C) + c_off, ni));
}

}  // namespace st::bulk
