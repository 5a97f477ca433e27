// CpuOps: low rank (PowerSGD's products with OpenBLAS; op_list.h, ST_BULK_LOW_RANK_OPS).
#include "core/error.h"
#include "core/kernels/blas.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cpu_common.h"
#include "sparsify/bulk/cpu_ops.h"

namespace st::bulk {

// --- Dense algebra ---

void CpuOps::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const Buffer& A, int64_t a_off, const Buffer& B, int64_t b_off, float beta,
                  Buffer& C, int64_t c_off) {
  check::gemm_shapes(m, n, k, A, a_off, B, b_off, C, c_off);
  if (m == 0 || n == 0) return;
  cpu::gemm(trans_a, trans_b, m, n, k, alpha, f32(A) + a_off, f32(B) + b_off, beta, f32(C) + c_off);
}

}  // namespace st::bulk
