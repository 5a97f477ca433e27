// cpu::gemm_ld in its four forms against a naive double-precision product: padded leading
// dimensions, alpha and beta, one shape small and one large enough for the threaded path
// (oneDNN takes three of the forms when the build has it, OpenBLAS the fourth), and the
// same calls made from inside an OpenMP parallel region.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/kernels/blas.h"
#include "core/rng.h"

namespace st::test {
namespace {

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
};

std::vector<float> random_values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform() * 2.0f - 1.0f;
  return v;
}

// Runs one case with leading dimensions padded by 3 and returns the largest error
// relative to the reference's magnitude.
double worst_error(const GemmCase& g) {
  const int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  const int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = g.n + 3;
  const std::vector<float> a = random_values(a_rows * lda, 1), b = random_values(b_rows * ldb, 2);
  std::vector<float> c = random_values(g.m * ldc, 3);
  const std::vector<float> c0 = c;
  const float alpha = 0.5f, beta = -1.5f;
  cpu::gemm_ld(g.ta, g.tb, g.m, g.n, g.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  double worst = 0.0;
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double dot = 0.0, scale = 0.0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double x = g.ta ? a[p * lda + i] : a[i * lda + p];
        const double y = g.tb ? b[j * ldb + p] : b[p * ldb + j];
        dot += x * y;
        scale += std::fabs(x * y);
      }
      const double want = alpha * dot + beta * c0[i * ldc + j];
      worst = std::max(worst, std::fabs(c[i * ldc + j] - want) / (1.0 + scale));
    }
  // The padding between rows is never written.
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = g.n; j < ldc; ++j) EXPECT_EQ(c[i * ldc + j], c0[i * ldc + j]);
  return worst;
}

const std::vector<GemmCase> kCases = [] {
  std::vector<GemmCase> cases;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      cases.push_back({ta, tb, 5, 7, 3});
      cases.push_back({ta, tb, 96, 130, 70});
    }
  return cases;
}();

TEST(Gemm, FourFormsMatchTheReference) {
  for (const GemmCase& g : kCases)
    EXPECT_LT(worst_error(g), 1e-5) << "ta " << g.ta << " tb " << g.tb << " m " << g.m;
}

TEST(Gemm, CallsFromInsideAParallelRegion) {
  std::vector<double> worst(kCases.size(), 1.0);
#pragma omp parallel for num_threads(2) schedule(static)
  for (int64_t i = 0; i < static_cast<int64_t>(kCases.size()); ++i)
    worst[i] = worst_error(kCases[i]);
  for (size_t i = 0; i < kCases.size(); ++i) EXPECT_LT(worst[i], 1e-5) << "case " << i;
}

}  // namespace
}  // namespace st::test
