// Selection kernels against brute force, including ties and thread-count independence.
#include "sparsify/kernels/select_cpu.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "core/rng.h"
#include "sparsify/kernels/threshold_select_cpu.h"
#include "sparsify/partition_math.h"

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

// The compaction against a scalar loop: positions in order and the values at them, on
// sizes whose last SIMD vector and per-thread piece are ragged (not multiples of 16 or 32),
// over a range that starts off a vector boundary, with ties at tau and NaN/inf/-0.0 in
// the data, on 1 and 2 threads, into outputs that held a longer previous result.
TEST(SelectCpu, CompactMatchesScalarReferenceInOrder) {
  Rng rng(5);
  for (int64_t n : {int64_t{37}, int64_t{4099}, int64_t{300007}}) {
    std::vector<float> x(n);
    for (auto& v : x) v = std::round(rng.normal() * 16.0f) / 16.0f;  // ties at tau
    x[n / 2] = std::nanf("");
    x[n / 3] = -INFINITY;
    x[n - 1] = -0.0f;
    x[n - 2] = 1.5f;  // a hit in the ragged tail
    for (const float tau : {0.0f, 1.5f, 2.5f, 1e9f}) {
      const uint32_t key = part::abs_key(tau);
      for (const int64_t begin : {int64_t{0}, int64_t{3}}) {
        std::vector<int32_t> want_idx;
        std::vector<float> want_val;
        for (int64_t i = begin; i < n; ++i)
          if (part::abs_key(x[i]) >= key) {
            want_idx.push_back(static_cast<int32_t>(i));
            want_val.push_back(x[i]);
          }
        for (const int threads : {1, 2}) {
          omp_set_num_threads(threads);
          std::vector<int32_t> idx(n + 5, -7);
          std::vector<float> val(n + 5, -7.0f);
          select::compact_abs_ge(x.data(), begin, n, key, idx, &val);
          const std::string where = "n=" + std::to_string(n) + " tau=" + std::to_string(tau) +
                                    " begin=" + std::to_string(begin) +
                                    " threads=" + std::to_string(threads);
          EXPECT_EQ(idx, want_idx) << where;
          ASSERT_EQ(val.size(), want_val.size()) << where;
          // Bitwise: NaN and -0.0 must come through as they are.
          EXPECT_EQ(0, std::memcmp(val.data(), want_val.data(), val.size() * sizeof(float)))
              << where;
          std::vector<int32_t> only;
          select::compact_abs_ge(x.data(), begin, n, key, only);
          EXPECT_EQ(only, want_idx) << where;
          select::abs_threshold(x.data(), begin, n, tau, false, only);
          EXPECT_EQ(only, want_idx) << where;
        }
      }
    }
  }
  omp_set_num_threads(2);
}

// MiCRO's partition select is the same compaction, with the fallback position when none
// passes.
TEST(SelectCpu, ThresholdSelectMatchesScalarReference) {
  Rng rng(6);
  std::vector<float> x(300011);
  for (auto& v : x) v = rng.normal();
  const part::Range owned{1001, 290003};
  for (const float tau : {0.5f, 3.0f, 100.0f}) {
    std::vector<int32_t> want;
    for (int64_t i = owned.begin; i < owned.end; ++i)
      if (std::abs(x[i]) >= tau) want.push_back(static_cast<int32_t>(i));
    if (want.empty()) want.push_back(static_cast<int32_t>(part::fallback_index(owned, 12345)));
    std::vector<int32_t> got;
    EXPECT_EQ(select::threshold_select_cpu(x.data(), owned, tau, 12345, got),
              static_cast<int64_t>(want.size()));
    EXPECT_EQ(got, want) << "tau=" << tau;
  }
}

}  // namespace
}  // namespace st::test
