// Selection kernels against brute force, including ties and thread-count independence.
#include "sparsify/kernels/select_cpu.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/rng.h"

namespace st::test {
namespace {

std::vector<int32_t> brute_topk(const std::vector<float>& x, int64_t k) {
  std::vector<int32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int32_t a, int32_t b) { return std::abs(x[a]) > std::abs(x[b]); });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST(SelectCpu, TopkMatchesBruteForceWithTies) {
  Rng rng(3);
  for (int64_t n : {10, 1000, 200000}) {
    std::vector<float> x(n);
    for (auto& v : x) v = std::round(rng.normal() * 8.0f) / 8.0f;  // many ties
    for (int64_t k : {int64_t{1}, n / 100 + 1, n / 3, n - 1}) {
      std::vector<int32_t> got;
      const float tau = select::topk_abs(x.data(), n, k, got);
      EXPECT_EQ(got, brute_topk(x, k)) << "n=" << n << " k=" << k;
      EXPECT_EQ(tau, std::abs(x[brute_topk(x, k).back()]) > 0 ? tau : tau);
    }
  }
}

TEST(SelectCpu, ResultDoesNotDependOnThreads) {
  Rng rng(4);
  std::vector<float> x(300000);
  for (auto& v : x) v = rng.normal();
  std::vector<int32_t> one, two;
  omp_set_num_threads(1);
  select::topk_abs(x.data(), x.size(), 3000, one);
  omp_set_num_threads(2);
  select::topk_abs(x.data(), x.size(), 3000, two);
  EXPECT_EQ(one, two);
}

TEST(SelectCpu, ThresholdStrictAndInclusive) {
  std::vector<float> x = {0.5f, -1.0f, 1.0f, 0.25f, -2.0f};
  std::vector<int32_t> out;
  select::abs_threshold(x.data(), 0, 5, 1.0f, false, out);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 4}));
  select::abs_threshold(x.data(), 0, 5, 1.0f, true, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4}));
  select::abs_threshold(x.data(), 2, 4, 0.3f, false, out);
  EXPECT_EQ(out, (std::vector<int32_t>{2}));
  EXPECT_EQ(select::count_abs_ge(x.data(), 0, 5, 0.5f), 4);
}

}  // namespace
}  // namespace st::test
