// The threshold family on bulk::Ops: SIDCo's passes (exceed_moments, exceed_compact) on
// known values and against a reference written in the pre-interface form, and the
// converted methods' select_on() against their rules written directly on the selection
// kernels (sparsify/kernels/select_cpu.h). Bit for bit throughout: the interface must not
// change a single selection on the CPU.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/gaussiank.h"
#include "sparsify/host_select.h"
#include "sparsify/kernels/select_cpu.h"
#include "sparsify/redsync.h"
#include "sparsify/sage.h"
#include "sparsify/sidco.h"
#include "sparsify/sidco_fit.h"

namespace st::test {
namespace {

using bulk::Buffer;
using bulk::CpuOps;
using bulk::Elem;
using sidco::Moments;

constexpr int64_t kBlock = bulk::kMomentBlock;

Buffer upload(CpuOps& ops, const std::vector<float>& v) {
  Buffer b;
  ops.upload(v.data(), Elem::F32, static_cast<int64_t>(v.size()), b);
  return b;
}

template <class T>
std::vector<T> download(CpuOps& ops, const Buffer& b) {
  std::vector<T> v(static_cast<size_t>(b.size()));
  ops.download(b, 0, b.size(), v.data());
  return v;
}

// Heavy-tailed data (normal x |normal|), with exact zeros sprinkled in.
std::vector<float> heavy(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = i % 97 == 0 ? 0.0f : rng.normal() * std::abs(rng.normal());
  return x;
}

void expect_same(const Moments& a, const Moments& b, bool with_log = false) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.sum, b.sum);
  EXPECT_EQ(a.sumsq, b.sumsq);
  if (with_log) {
    EXPECT_EQ(a.sumlog, b.sumlog);
  }
  if (a.count > 0) {
    EXPECT_EQ(a.min, b.min);
  }
}

// --- The reference: SIDCo's passes as they were written on raw pointers before the
// interface (fixed blocks, float inside a block, double across blocks, in block order).

Moments ref_moments(const float* v, int64_t n, float tau, double log_scale) {
  Moments total;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    Moments m;
    if (tau < 0 && log_scale > 0) {
      double s = 0;
      for (int64_t i = b; i < end; ++i) s += std::log(std::abs(v[i]) * log_scale + 2.2e-16);
      m.sumlog = s;
    } else if (tau < 0) {
      float s = 0, q = 0;
#pragma omp simd reduction(+ : s, q)
      for (int64_t i = b; i < end; ++i) {
        const float a = std::abs(v[i]);
        s += a;
        q += a * a;
      }
      m.count = end - b;
      m.sum = s;
      m.sumsq = q;
    } else {
      const float inf = std::numeric_limits<float>::infinity();
      float c = 0, s = 0, q = 0, mn = inf;
#pragma omp simd reduction(+ : c, s, q) reduction(min : mn)
      for (int64_t i = b; i < end; ++i) {
        const float a = std::abs(v[i]);
        const float hit = a > tau ? 1.0f : 0.0f;
        const float d = a * hit;
        c += hit;
        s += d;
        q += d * d;
        mn = std::min(mn, a > tau ? a : inf);
      }
      m.count = static_cast<int64_t>(c);
      m.sum = s;
      m.sumsq = q;
      m.min = c > 0 ? mn : std::numeric_limits<double>::infinity();
    }
    total.add(m);
  }
  return total;
}

// The multi-stage estimate with the reference passes: the second exceedance pass and
// later ones compact (positions, values) when another pass follows. Returns the selection.
std::vector<int32_t> ref_sidco(const std::vector<float>& x, sidco::Variant v, int stages,
                               double delta, sidco::Estimate& e) {
  std::vector<int32_t> cand;
  std::vector<float> vals;
  bool compacted = false;
  int passes = 0;
  const int64_t n = static_cast<int64_t>(x.size());
  auto fn = [&](float tau, double log_scale, bool more) {
    if (tau < 0) return ref_moments(x.data(), n, tau, log_scale);
    ++passes;
    const std::vector<float>& src = compacted ? vals : x;
    const Moments m = ref_moments(src.data(), static_cast<int64_t>(src.size()), tau, 0.0);
    if (more && passes >= 2) {
      std::vector<int32_t> c2;
      std::vector<float> v2;
      for (size_t i = 0; i < src.size(); ++i)
        if (std::abs(src[i]) > tau) {
          c2.push_back(compacted ? cand[i] : static_cast<int32_t>(i));
          v2.push_back(src[i]);
        }
      cand.swap(c2);
      vals.swap(v2);
      compacted = true;
    }
    return m;
  };
  e = sidco::estimate_with(n, v, stages, delta, fn);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i)
    if (std::abs(x[i]) > e.tau) out.push_back(static_cast<int32_t>(i));
  return out;
}

TEST(ThresholdOps, ExceedMomentsKnownValues) {
  CpuOps ops;
  const Buffer x = upload(ops, {-3.0f, 1.0f, 0.5f, -2.0f, 4.0f});
  const Moments all = ops.exceed_moments(x, {0, 5}, -1.0f, 0.0);
  EXPECT_EQ(all.count, 5);
  EXPECT_DOUBLE_EQ(all.sum, 10.5);
  EXPECT_DOUBLE_EQ(all.sumsq, 30.25);
  const Moments above = ops.exceed_moments(x, {0, 5}, 1.0f, 0.0);  // strict: 1 is out
  EXPECT_EQ(above.count, 3);
  EXPECT_DOUBLE_EQ(above.sum, 9.0);
  EXPECT_DOUBLE_EQ(above.sumsq, 29.0);
  EXPECT_DOUBLE_EQ(above.min, 2.0);
  const Moments inner = ops.exceed_moments(x, {1, 4}, 0.75f, 0.0);  // {1, 0.5, -2}
  EXPECT_EQ(inner.count, 2);
  EXPECT_DOUBLE_EQ(inner.sum, 3.0);
  EXPECT_DOUBLE_EQ(inner.min, 1.0);
  const Moments none = ops.exceed_moments(x, {0, 5}, 4.0f, 0.0);
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.min, std::numeric_limits<double>::infinity());
  const Moments logs = ops.exceed_moments(x, {0, 5}, -1.0f, 0.5);
  EXPECT_NEAR(logs.sumlog, std::log(1.5 * 0.5 * 0.25 * 1.0 * 2.0), 1e-12);
}

TEST(ThresholdOps, ExceedMomentsMatchReferenceOnAnyThreadCount) {
  CpuOps ops;
  const int64_t n = 3 * kBlock + 1234;
  const std::vector<float> x = heavy(n, 11);
  const Buffer xb = upload(ops, x);
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    for (float tau : {-1.0f, 0.0f, 0.3f, 2.5f}) {
      SCOPED_TRACE(testing::Message() << "threads " << threads << " tau " << tau);
      expect_same(ops.exceed_moments(xb, {0, n}, tau, 0.0), ref_moments(x.data(), n, tau, 0.0));
      // A range that starts off the block grid: blocks count from its start.
      expect_same(ops.exceed_moments(xb, {777, n}, tau, 0.0),
                  ref_moments(x.data() + 777, n - 777, tau, 0.0));
    }
    expect_same(ops.exceed_moments(xb, {0, n}, -1.0f, 0.01), ref_moments(x.data(), n, -1.0f, 0.01),
                /*with_log=*/true);
  }
  omp_set_num_threads(saved);
}

TEST(ThresholdOps, ExceedCompactIsTheStrictSelectionWithItsValues) {
  CpuOps ops;
  const int64_t n = 2 * kBlock + 4321, begin = 1000;
  const std::vector<float> x = heavy(n, 12);
  const Buffer xb = upload(ops, x);
  const float tau = 1.0f;
  Buffer idx, vals;
  const Moments m = ops.exceed_compact(xb, {begin, n}, tau, nullptr, idx, vals);
  expect_same(m, ops.exceed_moments(xb, {begin, n}, tau, 0.0));
  std::vector<int32_t> want;
  select::abs_threshold(x.data(), begin, n, tau, /*strict=*/true, want);
  ASSERT_EQ(download<int32_t>(ops, idx), want);
  EXPECT_EQ(m.count, static_cast<int64_t>(want.size()));
  const std::vector<float> got_vals = download<float>(ops, vals);
  for (size_t j = 0; j < want.size(); ++j) ASSERT_EQ(got_vals[j], x[want[j]]);
  // A second compaction of the first one's values, mapped through its positions, is the
  // strict selection at the higher threshold on x itself.
  Buffer idx2, vals2;
  const Moments m2 = ops.exceed_compact(vals, {0, vals.size()}, 2.0f, &idx, idx2, vals2);
  select::abs_threshold(x.data(), begin, n, 2.0f, /*strict=*/true, want);
  EXPECT_EQ(download<int32_t>(ops, idx2), want);
  EXPECT_EQ(m2.count, static_cast<int64_t>(want.size()));
  // Nothing above: empty outputs.
  ops.exceed_compact(xb, {0, n}, 1e30f, nullptr, idx, vals);
  EXPECT_EQ(idx.size(), 0);
  EXPECT_EQ(vals.size(), 0);
}

TEST(ThresholdOps, SidcoEstimateAndSelectionMatchTheReference) {
  const int64_t n = 5 * kBlock + 77;
  const std::vector<float> x = heavy(n, 13);
  CpuOps ops;
  const Buffer xb = upload(ops, x);
  for (auto v : {sidco::Variant::E, sidco::Variant::P, sidco::Variant::GP})
    for (int stages : {0, 1, 2, 3, 5}) {
      SCOPED_TRACE(testing::Message() << sidco::variant_name(v) << " stages " << stages);
      sidco::Estimate want_e;
      const std::vector<int32_t> want = ref_sidco(x, v, stages, 0.001, want_e);
      sidco::Workspace ws;
      const sidco::Estimate e = sidco::estimate(ops, xb, v, stages, 0.001, ws);
      EXPECT_EQ(e.tau, want_e.tau);
      EXPECT_EQ(e.eta, want_e.eta);
      EXPECT_EQ(e.stages, want_e.stages);
      Buffer out;
      sidco::select_above(ops, xb, e, ws, out);
      EXPECT_EQ(download<int32_t>(ops, out), want);
      if (stages == 5) {
        EXPECT_TRUE(ws.compacted);  // the compacted path was taken
      }
    }
}

// --- The converted methods against their rules on the kernels ---

SelectContext context(int64_t n, double d, int64_t t = 0) {
  SelectContext c;
  c.density = d;
  c.k = static_cast<int64_t>(std::floor(d * static_cast<double>(n)));
  c.iteration = t;
  c.seed = 3;
  return c;
}

TEST(ThresholdOps, GaussianKMatchesItsRuleOnTheKernels) {
  const int64_t n = 300000;
  const std::vector<float> x = heavy(n, 14);
  for (double d : {0.01, 0.001}) {
    GaussianK rule;
    Selection sel;
    select_on_host(rule, context(n, d), x.data(), n, sel);
    const select::Moments m = select::mean_std(x.data(), n);
    double thr = GaussianK::initial_threshold(m.mean, std::sqrt(m.variance), d);
    std::vector<int32_t> want;
    const double k = std::floor(d * n);
    for (int loop = 0; loop < GaussianK::kLoops; ++loop) {
      select::abs_threshold(x.data(), 0, n, static_cast<float>(thr), true, want);
      const double c = static_cast<double>(want.size());
      if ((c >= 2 * k / 3 && c <= 4 * k / 3) || loop + 1 == GaussianK::kLoops) break;
      thr *= c < 2 * k / 3 ? 0.5 : 1.5;
    }
    EXPECT_EQ(sel.threshold, thr) << "d=" << d;
    EXPECT_EQ(sel.indices, want) << "d=" << d;
  }
}

TEST(ThresholdOps, RedSyncMatchesItsRuleOnTheKernels) {
  const int64_t n = 300000;
  const std::vector<float> x = heavy(n, 15);
  const int64_t k = 300;
  RedSync rule;
  Selection sel;
  SelectContext ctx = context(n, 0.001);
  select_on_host(rule, ctx, x.data(), n, sel);
  const select::AbsMeanMax a = select::abs_mean_max(x.data(), n);
  const double span = static_cast<double>(a.max) - a.mean;
  double lo = 0, hi = 1;
  float thr = 0;
  int64_t nnz = 0;
  for (int it = 0; it < RedSync::kIters; ++it) {
    const double r = 0.5 * (lo + hi);
    thr = static_cast<float>(a.mean + r * span);
    nnz = select::count_abs(x.data(), 0, n, thr, true);
    if (nnz > k && nnz < 2 * k) break;
    (nnz >= 2 * k ? lo : hi) = r;
  }
  std::vector<int32_t> want;
  select::abs_threshold(x.data(), 0, n, thr, true, want);
  EXPECT_EQ(sel.threshold, thr);
  EXPECT_EQ(sel.indices, want);
  EXPECT_GT(nnz, k);
}

TEST(ThresholdOps, SageSampleMeanIsTheHostSumOfTheGatheredSample) {
  // Two steps on a vector whose sample mean is known in closed form: constant |x|.
  const int64_t n = 50000;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = i % 2 ? 0.25f : -0.25f;
  Sage rule(SageOptions{});
  Selection sel;
  select_on_host(rule, context(n, 0.01, 0), x.data(), n, sel);
  const double lambda0 = 1.0 / (2.0 * std::sqrt(500.0));
  EXPECT_DOUBLE_EQ(rule.lambda(0), lambda0);
  EXPECT_EQ(sel.indices.size(), static_cast<size_t>(n));  // every |x| = 0.25 >= lambda0
  // t = 1: alpha = 1 (same sample mean), d_exam = 1, beta = 2/(1+e^(d-1)), gamma = up.
  for (auto& v : x) v *= 2.0f;  // sample mean doubles: alpha = 2
  select_on_host(rule, context(n, 0.01, 1), x.data(), n, sel);
  const double beta = 2.0 / (1.0 + std::exp(0.01 - 1.0));
  EXPECT_NEAR(rule.lambda(0), lambda0 * 2.0 * beta * 1.05, 1e-15);
}

}  // namespace
}  // namespace st::test
