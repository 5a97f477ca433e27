#include "core/kernels/blas.h"

#include <cblas.h>

#ifdef ST_GEMM_ONEDNN
#include <dnnl.h>

#include "core/error.h"
#endif

namespace st::cpu {

// With oneDNN in the build, its sgemm takes every form except A x B^T (a layer's forward):
// on the LSTM step's shapes bench/gemm_bench measures it 0.86-0.93x OpenBLAS's time on
// the backward forms (A x B, A^T x B; 0.52x on the recurrent step's small A x B) and
// 1.00-1.07x on A x B^T, which stays with OpenBLAS. Like the OpenMP build of OpenBLAS,
// oneDNN runs single-threaded inside an OpenMP parallel region.
void gemm_ld(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) {
  if (m == 0 || n == 0) return;
#ifdef ST_GEMM_ONEDNN
  if (trans_a || !trans_b) {
    const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k,
                                            alpha, a, lda, b, ldb, beta, c, ldc);
    ST_CHECK(status == dnnl_success, "gemm: oneDNN sgemm failed (status ", static_cast<int>(status),
             ") for m=", m, " n=", n, " k=", k);
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  gemm_ld(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

}  // namespace st::cpu
