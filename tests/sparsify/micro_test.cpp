// MiCRO (Yoon & Oh, HiPC 2023): the threshold rule step by step, rotation, partitions
// disjoint and covering, selection and its one-element fallback, density tracking, and
// (under mpirun) exclusive selections and a rank-identical threshold.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "comm/communicator.h"
#include "core/rng.h"
#include "sparsify/host_select.h"
#include "sparsify/kernels/select_cpu.h"
#include "sparsify/kernels/threshold_select_cpu.h"
#include "sparsify/micro.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/comm/mpi_test_run.h"
#if defined(SPARSETRAIN_WITH_CUDA)
#include "../cuda/cuda_test_util.h"
#include "sparsify/kernels/threshold_select_cuda.h"
#endif

namespace st::test {
namespace {

SelectContext context(int bucket, int64_t t, int rank, int P, int64_t n, double d) {
  SelectContext c;
  c.bucket = bucket;
  c.iteration = t;
  c.rank = rank;
  c.world = P;
  c.density = d;
  c.k = std::max<int64_t>(1, static_cast<int64_t>(std::floor(d * n)));
  return c;
}

ExchangeFeedback feedback(int bucket, int64_t t, int64_t n, int64_t k, int64_t global) {
  ExchangeFeedback f;
  f.bucket = bucket;
  f.iteration = t;
  f.n = n;
  f.k = k;
  f.global_count = global;
  f.rank_counts = {global};
  return f;
}

TEST(MicroRule, InitialThresholdIsHalfInverseSqrtK) {
  EXPECT_DOUBLE_EQ(part::initial_threshold(100), 0.05);
  EXPECT_DOUBLE_EQ(part::initial_threshold(25557), 1.0 / (2.0 * std::sqrt(25557.0)));
  EXPECT_DOUBLE_EQ(part::initial_threshold(1), 0.5);
}

// Each band edge, in a known sequence: ratio = k_prev / k with k = 1000.
TEST(MicroRule, ThresholdStepsByBand) {
  const part::ThresholdRule r;
  struct Step {
    int64_t k_prev;
    double factor;
  };
  const Step steps[] = {
      {2000, 1.005},    // ratio 2     > 1.1       -> up
      {1101, 1.005},    // ratio 1.101 > 1.1       -> up
      {1100, 1.00125},  // ratio 1.1   (band top)  -> mid (it raises tau too)
      {1000, 1.00125},  // ratio 1                 -> mid
      {910, 1.00125},   // ratio 0.91  > 0.909     -> mid
      {909, 0.995},     // ratio 0.909 (band edge) -> down
      {500, 0.995},     // ratio 0.5               -> down
      {0, 0.995},       // nothing transmitted     -> down
  };
  double tau = part::initial_threshold(1000), expect = tau;
  for (const Step& s : steps) {
    tau = part::next_threshold(r, tau, s.k_prev, 1000);
    expect *= s.factor;
    EXPECT_DOUBLE_EQ(tau, expect) << "k_prev " << s.k_prev;
  }
}

// The same sequence through the sparsifier: tau_0 at the first selection, one step per
// observe(), each bucket on its own.
TEST(MicroRule, SparsifierFollowsTheRulePerBucket) {
  Micro m{part::ThresholdRule{}};
  const int64_t n = 100000, k = 1000;
  std::vector<float> x(n, 0.0f);
  Selection sel;
  select_on_host(m, context(0, 0, 0, 1, n, 0.01), x.data(), n, sel);
  select_on_host(m, context(7, 0, 0, 1, 50000, 0.01), x.data(), 50000, sel);
  EXPECT_DOUBLE_EQ(m.threshold(0), 1.0 / (2.0 * std::sqrt(1000.0)));
  EXPECT_DOUBLE_EQ(m.threshold(7), 1.0 / (2.0 * std::sqrt(500.0)));
  EXPECT_DOUBLE_EQ(m.state_signature(0), m.threshold(0));
  const double t0 = m.threshold(0), t7 = m.threshold(7);
  m.observe(feedback(0, 0, n, k, 1500));
  EXPECT_DOUBLE_EQ(m.threshold(0), t0 * 1.005);
  m.observe(feedback(0, 1, n, k, 1000));
  EXPECT_DOUBLE_EQ(m.threshold(0), t0 * 1.005 * 1.00125);
  m.observe(feedback(0, 2, n, k, 10));
  EXPECT_DOUBLE_EQ(m.threshold(0), t0 * 1.005 * 1.00125 * 0.995);
  EXPECT_DOUBLE_EQ(m.threshold(7), t7) << "another bucket's feedback moved this one";
}

TEST(MicroRule, ConstantsAreSpKeys) {
  SparsifierOptions o;
  o.params = {{"hi", "2"}, {"lo", "0.5"}, {"up", "1.5"}, {"mid", "1"}, {"down", "0.25"}};
  SparsifierPtr s = make_sparsifier("micro", o);
  auto& m = dynamic_cast<Micro&>(*s);
  std::vector<float> x(1000, 0.0f);
  Selection sel;
  select_on_host(m, context(0, 0, 0, 1, 1000, 0.1), x.data(), 1000, sel);
  const double t0 = m.threshold(0);
  m.observe(feedback(0, 0, 1000, 100, 201));  // ratio 2.01 > 2
  m.observe(feedback(0, 1, 1000, 100, 200));  // ratio 2 -> mid = 1
  m.observe(feedback(0, 2, 1000, 100, 50));   // ratio 0.5 -> down
  EXPECT_DOUBLE_EQ(m.threshold(0), t0 * 1.5 * 0.25);
  o.params = {{"hi", "0.5"}, {"lo", "0.9"}};
  EXPECT_THROW(make_sparsifier("micro", o), Error);
  o.params = {{"up", "-1"}};
  EXPECT_THROW(make_sparsifier("micro", o), Error);
}

TEST(MicroPartitions, RotationVisitsEveryPartitionOnce) {
  for (int P : {1, 2, 3, 4, 7, 16}) {
    for (int64_t t = 0; t < 3 * P + 2; ++t) {
      std::set<int> owned;
      for (int r = 0; r < P; ++r) {
        const int p = part::owned_partition(t, r, P);
        EXPECT_EQ(p, (t + r) % P);
        EXPECT_EQ(part::owner_of(t, p, P), r);
        owned.insert(p);
      }
      EXPECT_EQ(static_cast<int>(owned.size()), P) << "two ranks own one partition at t=" << t;
    }
    for (int r = 0; r < P; ++r) {
      std::set<int> visited;
      for (int64_t t = 100; t < 100 + P; ++t) visited.insert(part::owned_partition(t, r, P));
      EXPECT_EQ(static_cast<int>(visited.size()), P) << "rank " << r << " skips a partition";
    }
  }
}

TEST(MicroPartitions, DisjointCoveringNearEqual) {
  for (int64_t n : {0, 1, 3, 7, 100, 1001, 6000, 2500, 25557032}) {
    for (int P : {1, 2, 3, 4, 5, 8, 13, 64}) {
      int64_t next = 0;
      for (int p = 0; p < P; ++p) {
        const part::Range r = part::equal_partition(n, P, p);
        EXPECT_EQ(r.begin, next) << "gap or overlap, n=" << n << " P=" << P << " p=" << p;
        EXPECT_EQ(r.size(), n / P + (p < n % P ? 1 : 0)) << "n=" << n << " P=" << P;
        next = r.end;
      }
      EXPECT_EQ(next, n) << "partitions do not cover n=" << n << " P=" << P;
    }
  }
}

// Selection = brute-force |x| >= tau over the owned partition only.
TEST(MicroSelect, OwnPartitionOnlyAndFallback) {
  const int64_t n = 10007;
  const int P = 4;
  Rng rng(5);
  std::vector<float> x(n);
  for (auto& v : x) v = rng.normal() * 0.02f;  // tau_0 = 0.05 = 2.5 sigma: ~1% pass
  for (int64_t t = 0; t < 6; ++t) {
    for (int r = 0; r < P; ++r) {
      Micro m{part::ThresholdRule{}};
      Selection sel;
      const SelectContext c = context(0, t, r, P, n, 0.01);
      select_on_host(m, c, x.data(), n, sel);
      const part::Range own = part::equal_partition(n, P, (t + r) % P);
      EXPECT_EQ(m.partition(0, (t + r) % P).begin, own.begin);
      const float tau = static_cast<float>(m.threshold(0));
      std::vector<int32_t> expect;
      for (int64_t i = own.begin; i < own.end; ++i)
        if (std::abs(x[i]) >= tau) expect.push_back(static_cast<int32_t>(i));
      ASSERT_FALSE(expect.empty());
      EXPECT_EQ(sel.indices, expect) << "t=" << t << " r=" << r;
      EXPECT_DOUBLE_EQ(sel.threshold, m.threshold(0));
    }
  }
  // Nothing passes: one element, st + (t mod partition size).
  std::vector<float> zeros(n, 0.0f);
  for (int64_t t : {0, 1, 5, 2501, 2502}) {
    Micro m{part::ThresholdRule{}};
    Selection sel;
    select_on_host(m, context(0, t, 1, P, n, 0.01), zeros.data(), n, sel);
    const part::Range own = part::equal_partition(n, P, (t + 1) % P);
    ASSERT_EQ(sel.indices.size(), 1u);
    EXPECT_EQ(sel.indices[0], own.begin + t % own.size()) << "t=" << t;
  }
}

// The SIMD kernel = the reference one-pass kernel, on ranges of every alignment, with
// ties at tau, signed zeros, NaN and infinities, on 1 and 2 threads.
TEST(MicroSelect, SimdKernelMatchesReference) {
  Rng rng(17);
  std::vector<float> x(700001);
  for (auto& v : x) v = std::round(rng.normal() * 16.0f) / 16.0f;  // many exact ties
  x[5] = -0.0f;
  x[77] = std::nanf("");
  x[78] = -INFINITY;
  x[699990] = INFINITY;
  const int saved_threads = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (const part::Range r : {part::Range{0, 700001}, part::Range{3, 37}, part::Range{1, 699999},
                                part::Range{31, 262200}, part::Range{64, 64 + 32 * 1000}}) {
      for (float tau : {0.0f, 1.0f, 2.5f, 3.1875f}) {
        std::vector<int32_t> got, expect;
        select::threshold_select_cpu(x.data(), r, tau, 3, got);
        select::abs_threshold(x.data(), r.begin, r.end, tau, false, expect);
        if (expect.empty()) expect.push_back(static_cast<int32_t>(part::fallback_index(r, 3)));
        EXPECT_EQ(got, expect) << "range [" << r.begin << ", " << r.end << ") tau " << tau
                               << " threads " << threads;
      }
    }
  }
  omp_set_num_threads(saved_threads);
  std::vector<int32_t> none;
  EXPECT_EQ(select::threshold_select_cpu(x.data(), part::Range{10, 10}, 1.0f, 0, none), 0);
  EXPECT_TRUE(none.empty());
}

// Without error feedback, on a stationary gradient distribution, the threshold walks to
// the level that selects about d n and the density stays there (the paper's Fig. 6).
TEST(MicroSelect, DensityTracksTarget) {
  const int64_t n = 20000;
  const double d = 0.01;
  Micro m{part::ThresholdRule{}};
  Rng rng(11);
  std::vector<float> x(n);
  double sum = 0;
  const int steps = 600, tail = 300;
  for (int t = 0; t < steps; ++t) {
    for (auto& v : x) v = rng.normal() * 0.0163f;  // tau_0 selects ~3 d n at first
    Selection sel;
    const SelectContext c = context(0, t, 0, 1, n, d);
    select_on_host(m, c, x.data(), n, sel);
    const int64_t got = static_cast<int64_t>(sel.indices.size());
    if (t >= steps - tail) sum += static_cast<double>(got) / n;
    m.observe(feedback(0, t, n, c.k, got));
  }
  const double mean = sum / tail;
  EXPECT_GT(mean, 0.85 * d);
  EXPECT_LT(mean, 1.1 * d);
}

// Under mpirun: through the hook, the ranks' selections are disjoint (no build-up:
// global = sum of local counts), each inside its own rotating partition, and tau agrees.
TEST(MicroDistributed, ExclusiveSelectionsAndSameThreshold) {
  Communicator& c = world();
  const int P = c.size(), r = c.rank();
  SparsifierOptions opt;
  opt.density = 0.01;
  SparsifyHook hook(make_sparsifier("micro", opt), opt);
  auto& m = dynamic_cast<Micro&>(hook.sparsifier());
  Bucket bucket;
  bucket.id = 3;
  bucket.numel = 30011;
  for (int64_t t = 0; t < 12; ++t) {
    Rng rng(100 * t + r);
    Tensor g = Tensor::empty({bucket.numel});
    for (int64_t i = 0; i < bucket.numel; ++i) g.f32()[i] = rng.normal() * 0.01f;
    hook.exchange(bucket, g, c, t);
    const SparsifyStats s = hook.take_stats().at(0);
    const Selection& sel = hook.last_selection(bucket.id);
    const part::Range own = part::equal_partition(bucket.numel, P, (t + r) % P);
    int64_t outside = 0;  // EXPECT, not ASSERT: keep the ranks' collectives in step
    for (int32_t i : sel.indices) outside += i < own.begin || i >= own.end;
    EXPECT_EQ(outside, 0) << "selected outside the own partition at t=" << t;
    const double total = c.allreduce_scalar(static_cast<double>(s.local_count));
    EXPECT_EQ(s.global_count, static_cast<int64_t>(total)) << "selections overlap at t=" << t;
    const double tau = m.threshold(bucket.id);
    Tensor mx = Tensor::from_vector({static_cast<float>(tau)}, {1}), mn = mx.clone();
    c.allreduce(mx, ReduceOp::Max);
    c.allreduce(mn, ReduceOp::Min);
    EXPECT_EQ(mx.f32()[0], mn.f32()[0]) << "tau differs between ranks at t=" << t;
  }
}

#if defined(SPARSETRAIN_WITH_CUDA)
// The CUB select-if kernel picks exactly the CPU's set, including the fallback element.
TEST(MicroCuda, ThresholdSelectMatchesCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  const int64_t n = 300001;
  Rng rng(9);
  std::vector<float> x(n);
  for (auto& v : x) v = rng.normal();
  Tensor host = Tensor::from_vector(x, {n});
  Tensor dev = host.to(Device::cuda(0));
  const part::Range own = part::equal_partition(n, 4, 2);
  for (float tau : {2.5f, 100.0f}) {
    Tensor out = Tensor::empty({own.size()}, DType::I32, Device::cuda(0));
    const int64_t got = select::threshold_select_cuda(dev.f32(), own, tau, 7, out.data<int32_t>());
    std::vector<int32_t> expect;
    for (int64_t i = own.begin; i < own.end; ++i)
      if (std::abs(x[i]) >= tau) expect.push_back(static_cast<int32_t>(i));
    if (expect.empty()) expect.push_back(static_cast<int32_t>(part::fallback_index(own, 7)));
    ASSERT_EQ(got, static_cast<int64_t>(expect.size()));
    Tensor back = out.to(Device::cpu());
    const int32_t* b = back.data<int32_t>();
    EXPECT_EQ(std::vector<int32_t>(b, b + got), expect) << "tau=" << tau;
  }
}
#endif

}  // namespace
}  // namespace st::test
