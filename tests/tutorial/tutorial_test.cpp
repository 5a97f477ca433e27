// The tutorial's exercises (docs/tutorial/). Each test calls the real function a page
// asks the reader to write, with inputs whose results are worked out by hand, so the
// exercise can never drift from the code: in CI the tests pass against the shipped
// implementation; a reader who replaces a function's body reruns
// `ctest -L tutorial -R tutorial_stepN` against their own version.
// Runs under mpirun on 2, 3 and 4 ranks (ctest tutorial_stepN_npP) and on one process;
// the expected values are written for any number of ranks P. tests/tutorial/mutants.py
// lists the wrong answers each exercise's tests are known to catch (ctest tutorial_mutants).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "core/emu/launch.h"
#include "core/emu/runtime.h"
#include "core/stream_sync.h"
#include "layers/flat_params.h"
#include "layers/linear.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "sparsify/host_select.h"
#include "sparsify/partition_math.h"
#include "sparsify/registry.h"
#include "sparsify/sidco_fit.h"
#include "sparsify/sparsify_hook.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/gradcheck.h"
#include "tests/tutorial/params_layer.h"

namespace st::test {
namespace {

// ---- Step 1: the layer contract, forward, backward, SGD --------------------------------
// Exercise: write Linear::backward_cpu (layers/linear.cpp).

TEST(Step1, LinearForwardBackwardKnownValues) {
  Rng rng(0);
  Linear fc(2, 1, true, rng);
  fc.weight().value.f32()[0] = 3.0f;
  fc.weight().value.f32()[1] = 4.0f;
  fc.bias()->value.f32()[0] = 0.5f;
  // Each announcement records the gradient as it stands then: a reducer sends exactly
  // that, so it must already be final.
  int ready = 0;
  std::vector<std::vector<float>> announced;
  auto record = [&](Param& p) {
    ++ready;
    announced.push_back(p.grad.to_vector());
  };
  fc.weight().on_grad_ready = record;
  fc.bias()->on_grad_ready = record;
  fc.weight().grad.zero();
  fc.bias()->grad.zero();
  // y = 3 * 1 + 4 * 2 + 0.5
  const Tensor y = fc.forward(Tensor::from_vector({1.0f, 2.0f}, {1, 2}));
  EXPECT_FLOAT_EQ(y.f32()[0], 11.5f);
  // dL/dy = 2: dx = 2 w, dW = 2 x, db = 2.
  const Tensor dx = fc.backward(Tensor::from_vector({2.0f}, {1, 1}));
  EXPECT_FLOAT_EQ(dx.f32()[0], 6.0f);
  EXPECT_FLOAT_EQ(dx.f32()[1], 8.0f);
  EXPECT_FLOAT_EQ(fc.weight().grad.f32()[0], 2.0f);
  EXPECT_FLOAT_EQ(fc.weight().grad.f32()[1], 4.0f);
  EXPECT_FLOAT_EQ(fc.bias()->grad.f32()[0], 2.0f);
  EXPECT_EQ(ready, 2) << "backward must announce each parameter's gradient exactly once";
  ASSERT_EQ(announced.size(), 2u);
  EXPECT_EQ(announced[0], (std::vector<float>{2.0f, 4.0f}))
      << "the weight was announced before its gradient was added";
  EXPECT_EQ(announced[1], (std::vector<float>{2.0f})) << "the bias was announced early";
  // The contract: gradients accumulate (+=), they are not overwritten.
  fc.forward(Tensor::from_vector({1.0f, 2.0f}, {1, 2}));
  fc.backward(Tensor::from_vector({2.0f}, {1, 1}));
  EXPECT_FLOAT_EQ(fc.weight().grad.f32()[1], 8.0f);
  // Plain SGD: w <- w - lr grad.
  SgdOptions o;
  o.lr = 0.1f;
  Sgd sgd({&fc.weight(), fc.bias()}, o);
  sgd.step();
  EXPECT_FLOAT_EQ(fc.weight().value.f32()[0], 3.0f - 0.1f * 4.0f);
  EXPECT_FLOAT_EQ(fc.weight().value.f32()[1], 4.0f - 0.1f * 8.0f);
  EXPECT_FLOAT_EQ(fc.bias()->value.f32()[0], 0.5f - 0.1f * 4.0f);
}

TEST(Step1, BiasGradientSumsTheBatch) {
  // Two rows: db is the sum of both rows' dy, dW the sum of both outer products.
  Rng rng(0);
  Linear fc(2, 1, true, rng);
  fc.weight().grad.zero();
  fc.bias()->grad.zero();
  fc.forward(Tensor::from_vector({1.0f, 2.0f, 3.0f, 5.0f}, {2, 2}));
  fc.backward(Tensor::from_vector({2.0f, -1.0f}, {2, 1}));
  EXPECT_FLOAT_EQ(fc.bias()->grad.f32()[0], 1.0f);
  EXPECT_FLOAT_EQ(fc.weight().grad.f32()[0], 2.0f * 1.0f - 1.0f * 3.0f);
  EXPECT_FLOAT_EQ(fc.weight().grad.f32()[1], 2.0f * 2.0f - 1.0f * 5.0f);
}

TEST(Step1, LinearPassesTheGradientCheck) {
  Rng rng(3);
  Linear fc(5, 3, true, rng);
  check_layer_gradients(fc, random_tensor({4, 5}, rng));
}

// Four parameters of 256 floats (1 KiB each), registered p0..p3, so the flat buffer
// holds p3, p2, p1, p0.
struct FourParams : ParamsLayer {
  FourParams() : ParamsLayer({256, 256, 256, 256}) {}
};

// A hook that records the order of exchanges and then averages.
class RecordingHook : public AllreduceHook {
 public:
  void exchange(const Bucket& b, Tensor& g, Communicator& c, int64_t it) override {
    order.push_back(b.id);
    AllreduceHook::exchange(b, g, c, it);
  }
  std::vector<int> order;
};

constexpr double kKiB = 1.0 / 1024.0;  // in MB

bool launched(const Reducer& r, int bucket) {
  return r.bucket_times()[bucket].launch_ms >= 0;
}

// ---- Step 2: naive data parallelism -----------------------------------------------------
// Exercise: write AllreduceHook::exchange (comm/reducer.cpp): every rank ends with the
// average of the ranks' gradients.

TEST(Step2, AllreduceHookAverages) {
  Communicator& c = world();
  const int P = c.size(), r = c.rank();
  // Rank r holds gradient (r + 1) * [1, 2, 3]; the average over ranks is (P + 1) / 2 times.
  Tensor g = Tensor::from_vector({1.0f * (r + 1), 2.0f * (r + 1), 3.0f * (r + 1)}, {3});
  AllreduceHook hook;
  Bucket b;
  b.numel = 3;
  hook.exchange(b, g, c, 0);
  const float m = (P + 1) / 2.0f;
  EXPECT_FLOAT_EQ(g.f32()[0], 1.0f * m);
  EXPECT_FLOAT_EQ(g.f32()[1], 2.0f * m);
  EXPECT_FLOAT_EQ(g.f32()[2], 3.0f * m);
}

TEST(Step2, TinyCapsGiveOneBucketPerParameter) {
  FourParams net;
  FlatParams flat(net, Device::cpu());
  ReducerOptions o;
  o.first_bucket_mb = o.bucket_cap_mb = 1e-9;  // the naive scheme's flags
  Reducer reducer(flat, world(), std::make_shared<AllreduceHook>(), o);
  ASSERT_EQ(reducer.buckets().size(), 4u);
  const char* in_ready_order[4] = {"p3", "p2", "p1", "p0"};
  for (int b = 0; b < 4; ++b) {
    ASSERT_EQ(reducer.buckets()[b].params.size(), 1u);
    EXPECT_EQ(reducer.buckets()[b].params[0]->name, in_ready_order[b]);
  }
}

// ---- Step 3: buckets and the countdown --------------------------------------------------
// Exercise: write Reducer::on_grad_ready (comm/reducer.cpp): count the parameter's bucket
// down and launch complete buckets strictly in bucket order.

TEST(Step3, PlanCutsTheFlatBufferInOrder) {
  FourParams net;
  FlatParams flat(net, Device::cpu());
  ReducerOptions o;
  o.first_bucket_mb = 1 * kKiB;  // p3 alone
  o.bucket_cap_mb = 2 * kKiB;    // then p2 + p1, then p0
  Reducer reducer(flat, world(), std::make_shared<AllreduceHook>(), o);
  ASSERT_EQ(reducer.buckets().size(), 3u);
  EXPECT_EQ(reducer.buckets()[0].numel, 256);
  EXPECT_EQ(reducer.buckets()[1].numel, 512);
  EXPECT_EQ(reducer.buckets()[1].offset, 256);
  EXPECT_EQ(reducer.buckets()[1].params[0]->name, "p2");
  EXPECT_EQ(reducer.buckets()[1].params[1]->name, "p1");
  EXPECT_EQ(reducer.buckets()[2].params[0]->name, "p0");
}

TEST(Step3, CountdownLaunchesCompleteBucketsInOrder) {
  FourParams net;
  FlatParams flat(net, Device::cpu());
  ReducerOptions o;
  o.first_bucket_mb = 1 * kKiB;
  o.bucket_cap_mb = 2 * kKiB;
  auto hook = std::make_shared<RecordingHook>();
  Reducer reducer(flat, world(), hook, o);
  flat.zero_grads();
  reducer.begin_backward();
  net.p(3).mark_grad_ready();  // bucket 0 = {p3} is complete: it leaves at once
  EXPECT_TRUE(launched(reducer, 0));
  net.p(1).mark_grad_ready();  // bucket 1 = {p2, p1} still waits for p2
  EXPECT_FALSE(launched(reducer, 1));
  EXPECT_LT(reducer.bucket_times()[1].ready_ms, 0) << "bucket 1 is not ready without p2";
  net.p(0).mark_grad_ready();  // bucket 2 = {p0} is complete, but bucket 1 is not:
  EXPECT_GE(reducer.bucket_times()[2].ready_ms, 0);
  EXPECT_FALSE(launched(reducer, 2)) << "buckets must launch in order on every rank";
  net.p(2).mark_grad_ready();  // completes bucket 1, which releases bucket 2 as well
  EXPECT_TRUE(launched(reducer, 1));
  EXPECT_TRUE(launched(reducer, 2));
  reducer.finalize();
  EXPECT_EQ(hook->order, (std::vector<int>{0, 1, 2}));
}

// ---- Step 4: overlap ----------------------------------------------------------------------
// Exercise: the --no-overlap baseline (ReducerOptions::defer_until_finalize): nothing may
// leave during backward; finalize() launches everything and waits.

TEST(Step4, DeferredBucketsLeaveOnlyInFinalize) {
  FourParams net;
  FlatParams flat(net, Device::cpu());
  ReducerOptions o;
  o.first_bucket_mb = 1 * kKiB;
  o.bucket_cap_mb = 2 * kKiB;
  o.defer_until_finalize = true;
  auto hook = std::make_shared<RecordingHook>();
  Reducer reducer(flat, world(), hook, o);
  flat.zero_grads();
  reducer.begin_backward();
  for (int i = 3; i >= 0; --i) net.p(i).mark_grad_ready();
  for (int b = 0; b < 3; ++b) {
    EXPECT_GE(reducer.bucket_times()[b].ready_ms, 0);
    EXPECT_FALSE(launched(reducer, b)) << "bucket " << b << " left during backward";
  }
  const double waited = reducer.finalize();
  EXPECT_GE(waited, 0);
  EXPECT_EQ(hook->order, (std::vector<int>{0, 1, 2}));
  for (const BucketTimes& t : reducer.bucket_times()) EXPECT_GE(t.exchange_end_ms, t.launch_ms);
}

TEST(Step4, OverlappedBucketLeavesBeforeBackwardEnds) {
  FourParams net;
  FlatParams flat(net, Device::cpu());
  ReducerOptions o;
  o.first_bucket_mb = 1 * kKiB;
  o.bucket_cap_mb = 2 * kKiB;
  Reducer reducer(flat, world(), std::make_shared<AllreduceHook>(), o);
  flat.zero_grads();
  reducer.begin_backward();
  net.p(3).mark_grad_ready();
  EXPECT_TRUE(launched(reducer, 0)) << "with overlap the first bucket leaves at once";
  for (int i = 2; i >= 0; --i) net.p(i).mark_grad_ready();
  reducer.finalize();
}

// ---- Step 5: Top-k and error feedback -----------------------------------------------------
// Exercise: write the error-feedback update of SparsifyHook::sparse_exchange
// (sparsify/sparsify_hook.cpp): x = grad + residual before selection; afterwards the
// residual keeps what this rank did not deliver (union-allreduce, exchange_union in
// sparsify/exchange_patterns.cpp: zero at the union).

// Rank r's gradient for the Top-k tests: 0.1 (i + 1) everywhere, plus 10 at 2r and 2r+1,
// so each rank's top-2 is {2r, 2r+1} and the ranks' choices are disjoint.
std::vector<float> topk_gradient(int n, int r) {
  std::vector<float> g(n);
  for (int i = 0; i < n; ++i) g[i] = 0.1f * static_cast<float>(i + 1);
  g[2 * r] += 10.0f;
  g[2 * r + 1] += 10.0f;
  return g;
}

SparsifierOptions density(double d) {
  SparsifierOptions o;
  o.density = d;
  return o;
}

TEST(Step5, TopkResidualKeepsWhatWasNotSent) {
  Communicator& c = world();
  const int P = c.size(), r = c.rank(), n = 16;
  ASSERT_LE(P, 4) << "written for up to 4 ranks";
  SparsifyHook hook(make_sparsifier("topk", density(2.0 / n)), density(2.0 / n));
  Bucket b;
  b.numel = n;
  const std::vector<float> g = topk_gradient(n, r);
  Tensor grads = Tensor::from_vector(g, {n});
  hook.exchange(b, grads, c, 0);
  const std::vector<float> applied = grads.to_vector(), residual = hook.residual(0).to_vector();
  for (int i = 0; i < n; ++i) {
    const bool sent = i < 2 * P;  // the union of every rank's top-2
    const float base = 0.1f * static_cast<float>(i + 1);
    // Sent positions: the average of all ranks' x (one rank added 10 there).
    EXPECT_FLOAT_EQ(applied[i], sent ? base + 10.0f / P : 0.0f) << "position " << i;
    // Error feedback: what was not sent waits in the residual.
    EXPECT_FLOAT_EQ(residual[i], sent ? 0.0f : base) << "position " << i;
  }
  // The next step starts from x = grad + residual: an unsent value keeps growing until it
  // is large enough to be chosen.
  Tensor again = Tensor::from_vector(g, {n});
  hook.exchange(b, again, c, 1);
  EXPECT_FLOAT_EQ(hook.residual(0).to_vector()[n - 1], 2 * 0.1f * n);
}

TEST(Step5, NothingIsLostOverSteps) {
  // Invariant of error feedback: P * (sum of applied updates) + sum of the ranks'
  // residuals = sum of every raw gradient.
  Communicator& c = world();
  const int P = c.size(), r = c.rank(), n = 16;
  SparsifyHook hook(make_sparsifier("topk", density(2.0 / n)), density(2.0 / n));
  Bucket b;
  b.numel = n;
  std::vector<double> applied(n, 0.0), raw(n, 0.0);
  for (int t = 0; t < 5; ++t) {
    std::vector<float> g = topk_gradient(n, r);
    for (int i = 0; i < n; ++i) g[i] *= static_cast<float>(t % 3 + 1);
    for (int i = 0; i < n; ++i) raw[i] += g[i];
    Tensor grads = Tensor::from_vector(g, {n});
    hook.exchange(b, grads, c, t);
    for (int i = 0; i < n; ++i) applied[i] += grads.f32()[i];
  }
  Tensor res = hook.residual(0).clone(), raw_t = Tensor::zeros({n});
  for (int i = 0; i < n; ++i) raw_t.f32()[i] = static_cast<float>(raw[i]);
  c.allreduce(res);
  c.allreduce(raw_t);
  for (int i = 0; i < n; ++i)
    EXPECT_NEAR(P * applied[i] + res.f32()[i], raw_t.f32()[i], 1e-3) << "position " << i;
}

// ---- Step 6: gradient build-up; MiCRO's partitions and threshold -------------------------
// Exercise: write part::owned_partition, part::equal_partition and part::next_threshold
// (sparsify/partition_math.h).

TEST(Step6, TopkUnionGrowsWithRanks) {
  Communicator& c = world();
  const int P = c.size(), n = 16;
  SparsifyHook hook(make_sparsifier("topk", density(2.0 / n)), density(2.0 / n));
  Bucket b;
  b.numel = n;
  Tensor grads = Tensor::from_vector(topk_gradient(n, c.rank()), {n});
  hook.exchange(b, grads, c, 0);
  const SparsifyStats st = hook.take_stats().at(0);
  EXPECT_EQ(st.k, 2);
  EXPECT_EQ(st.local_count, 2);
  EXPECT_EQ(st.global_count, 2 * P) << "disjoint choices: the union is P k (build-up)";
  EXPECT_DOUBLE_EQ(st.actual_density, 2.0 * P / n);
}

TEST(Step6, MicroPartitionsRotateAndTile) {
  // 10 elements over 3 partitions: sizes 4, 3, 3.
  EXPECT_EQ(part::equal_partition(10, 3, 0).begin, 0);
  EXPECT_EQ(part::equal_partition(10, 3, 0).end, 4);
  EXPECT_EQ(part::equal_partition(10, 3, 1).begin, 4);
  EXPECT_EQ(part::equal_partition(10, 3, 2).end, 10);
  // Rank r owns partition (t + r) mod P: at any t the ranks own disjoint partitions.
  EXPECT_EQ(part::owned_partition(0, 0, 4), 0);
  EXPECT_EQ(part::owned_partition(1, 0, 4), 1);
  EXPECT_EQ(part::owned_partition(5, 3, 4), 0);
  for (int t = 0; t < 6; ++t) {
    std::vector<int> owned;
    for (int rank = 0; rank < 4; ++rank) owned.push_back(part::owned_partition(t, rank, 4));
    std::sort(owned.begin(), owned.end());
    EXPECT_EQ(owned, (std::vector<int>{0, 1, 2, 3})) << "iteration " << t;
  }
}

TEST(Step6, MicroThresholdSteps) {
  const part::ThresholdRule rule;                                        // the paper's constants
  EXPECT_DOUBLE_EQ(part::initial_threshold(100), 0.05);                  // 1 / (2 sqrt(100))
  EXPECT_DOUBLE_EQ(part::next_threshold(rule, 1.0, 200, 100), 1.005);    // too many: up
  EXPECT_DOUBLE_EQ(part::next_threshold(rule, 1.0, 100, 100), 1.00125);  // in band: up a bit
  EXPECT_DOUBLE_EQ(part::next_threshold(rule, 1.0, 50, 100), 0.995);     // too few: down
  // From 64x the target, 0.5% a step needs ln(64) / ln(1.005) = 834 steps to get there
  // by the rule alone: a fast fall of the density comes from the gradients, not the rule.
  double tau = 1.0;
  int steps = 0;
  while (tau < 64.0) {
    tau = part::next_threshold(rule, tau, 64, 1);
    ++steps;
  }
  EXPECT_EQ(steps, 834);
}

TEST(Step6, MicroHasNoBuildUp) {
  // Every value passes the threshold, so each rank sends its whole partition: the union
  // is exactly n, never more, whatever P.
  Communicator& c = world();
  const int n = 12;
  SparsifyHook hook(make_sparsifier("micro", density(0.25)), density(0.25));
  Bucket b;
  b.numel = n;
  Tensor grads = Tensor::from_vector(std::vector<float>(n, 5.0f), {n});
  hook.exchange(b, grads, c, 0);
  const SparsifyStats st = hook.take_stats().at(0);
  EXPECT_EQ(st.local_count, part::equal_partition(n, c.size(), c.rank()).size());
  EXPECT_EQ(st.global_count, n);
}

// ---- Step 7: load balance (padding) and SIDCo's fitted threshold ---------------------------
// Exercise: the padding overhead max_i k_i P / sum_i k_i - 1 (SparsifyStats::padding_overhead)
// and sidco::exponential_threshold (sparsify/sidco_fit.cpp).

TEST(Step7, PaddingOverheadOfUnevenCounts) {
  // MiCRO at t = 0: rank r owns partition r = [4r, 4r + 4) and selects there. Rank r puts
  // (r % 4) + 1 large values in it, so the counts are 1, 2, ... and the padded allgather
  // carries max_i k_i on every rank.
  Communicator& c = world();
  const int P = c.size(), r = c.rank(), n = 4 * P;
  std::vector<float> g(n, 0.0f);
  for (int j = 0; j <= r % 4; ++j) g[4 * r + j] = 1.0f;
  SparsifyHook hook(make_sparsifier("micro", density(0.25)), density(0.25));
  Bucket b;
  b.numel = n;
  Tensor grads = Tensor::from_vector(g, {n});
  hook.exchange(b, grads, c, 0);
  const SparsifyStats st = hook.take_stats().at(0);
  int64_t mx = 0, sum = 0;
  for (int q = 0; q < P; ++q) {
    mx = std::max<int64_t>(mx, q % 4 + 1);
    sum += q % 4 + 1;
  }
  EXPECT_EQ(st.local_count, r % 4 + 1);
  EXPECT_EQ(st.global_count, sum);
  EXPECT_DOUBLE_EQ(st.padding_overhead, static_cast<double>(mx) * P / sum - 1.0);
  // Worked by hand: counts 1, 2 (2 * 2 / 3 - 1); 1, 2, 3 (3 * 3 / 6 - 1); 1, 2, 3, 4
  // (4 * 4 / 10 - 1). On 2 ranks (max - min) / sum gives 1/3 as well: 3 and 4 ranks
  // tell the formulas apart.
  const double by_hand[5] = {0.0, 0.0, 1.0 / 3.0, 0.5, 0.6};
  if (P >= 2 && P <= 4) {
    EXPECT_NEAR(st.padding_overhead, by_hand[P], 1e-12) << P << " ranks";
  }
}

TEST(Step7, SidcoExponentialFitAgainstTheExactThreshold) {
  // eta = -mean ln(delta): the point where an exponential law's tail holds delta.
  EXPECT_NEAR(sidco::exponential_threshold(2.0, 0.01), 2.0 * std::log(100.0), 1e-12);
  // On magnitudes that really are exponential (exact quantiles of Exp(1)), the fitted
  // threshold selects about k values; on uniform magnitudes (not exponential) it misses.
  const int n = 10000;
  const double d = 0.01;
  std::vector<float> expo(n), unif(n);
  for (int i = 0; i < n; ++i) {
    const double u = (i + 0.5) / n;
    expo[i] = static_cast<float>(-std::log(1.0 - u));
    unif[i] = static_cast<float>(u);
  }
  auto count = [&](const std::vector<float>& x) {
    SparsifierPtr sp = make_sparsifier("sidco-e", density(d));
    SelectContext ctx;
    ctx.density = d;
    ctx.k = static_cast<int64_t>(d * n);
    Selection sel;
    select_on_host(*sp, ctx, x.data(), n, sel);
    return static_cast<double>(sel.indices.size()) / static_cast<double>(ctx.k);
  };
  EXPECT_NEAR(count(expo), 1.0, 0.1) << "exponential data: the fit is right";
  EXPECT_EQ(count(unif), 0.0) << "uniform data: eta = -0.5 ln 0.01 = 2.3 > max |x| = 1";
}

// ---- Step 10: the 16-bit exchange ---------------------------------------------------------
// Exercise: write AllreduceHook::exchange_16bit (comm/reducer.cpp): each rank divides by
// P, rounds to the wire format, allgathers, and every rank sums the P contributions in
// fp32 in rank order, so every rank holds the same sum without rounding at each hop.

TEST(Step10, SixteenBitExchangeAverages) {
  Communicator& c = world();
  const int P = c.size(), r = c.rank();
  // Rank r holds (r + 1) v; the average is (P + 1) / 2 v. With P a power of two every
  // (r + 1) v / P is exact in bf16 and fp16, so the result is exact; otherwise it is
  // within the wire format's rounding of each of the P terms.
  const std::vector<float> v = {1.0f, -2.0f, 3.0f, 0.5f, 96.0f};
  for (Precision wire : {Precision::BF16, Precision::F16}) {
    std::vector<float> mine;
    for (float x : v) mine.push_back(static_cast<float>(r + 1) * x);
    Tensor g = Tensor::from_vector(mine, {static_cast<int64_t>(v.size())});
    AllreduceHook hook(wire);
    Bucket b;
    b.numel = static_cast<int64_t>(v.size());
    hook.exchange(b, g, c, 0);
    const bool exact = (P & (P - 1)) == 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = (P + 1) / 2.0f * v[i];
      const float tol = exact ? 0.0f : std::fabs(want) * 2.0f * 0.00390625f;  // bf16: 2^-8
      EXPECT_NEAR(g.f32()[i], want, tol) << precision_name(wire) << ", position " << i;
    }
  }
}

// ---- Step 12: learning rate and the number of workers -------------------------------------
// Exercise: write LrSchedule::warmup_iterations and LrSchedule::warmup_lr
// (optim/lr_schedule.cpp): a linear ramp from base / W to base over the first W
// iterations, W = the warm-up epochs times the iterations per epoch, rounded.

TEST(Step12, WarmupRampsToTheScaledRateOverItsIterations) {
  // Base 0.4 (0.1 scaled to 4 workers), one epoch of 4 iterations of warm-up: the ramp
  // starts at 0.4 / 4 and reaches 0.4 at the warm-up's last iteration.
  const LrSchedule s = LrSchedule::constant(0.4f).with_warmup(1.0);
  const float want[] = {0.1f, 0.2f, 0.3f, 0.4f};
  for (int64_t it = 0; it < 4; ++it)
    EXPECT_FLOAT_EQ(s.lr(0, it, 4), want[it]) << "iteration " << it;
  EXPECT_FLOAT_EQ(s.lr(1, 0, 4), 0.4f) << "after the warm-up: the base rate";
  EXPECT_FLOAT_EQ(s.lr(7, 3, 4), 0.4f);
}

TEST(Step12, FractionalWarmupCountsIterationsNotEpochs) {
  // Half an epoch of 10 iterations: 5 warm-up iterations, 0.2 apart, then the base.
  const LrSchedule s = LrSchedule::constant(1.0f).with_warmup(0.5);
  for (int64_t it = 0; it < 5; ++it)
    EXPECT_NEAR(s.lr(0, it, 10), 0.2 * static_cast<double>(it + 1), 1e-6) << "iteration " << it;
  EXPECT_FLOAT_EQ(s.lr(0, 5, 10), 1.0f);
  // Three epochs of 2 iterations: the ramp crosses epoch boundaries (global iteration k).
  const LrSchedule three = LrSchedule::constant(0.6f).with_warmup(3.0);
  EXPECT_NEAR(three.lr(1, 1, 2), 0.1 + 0.5 * 3.0 / 5.0, 1e-6) << "epoch 1, iteration 1 = k 3";
}

TEST(Step12, DecayRunsAfterTheWarmup) {
  // Multistep at epoch 2 (x 0.1) after one warm-up epoch; cosine over the 4 epochs that
  // remain after one warm-up epoch of 5: half way (epoch 3) is half the base.
  const LrSchedule m = LrSchedule::multistep(0.8f, {2}).with_warmup(1.0);
  EXPECT_FLOAT_EQ(m.lr(1, 0, 4), 0.8f);
  EXPECT_FLOAT_EQ(m.lr(2, 0, 4), 0.08f);
  const LrSchedule c = LrSchedule::cosine(0.8f, 5).with_warmup(1.0);
  EXPECT_FLOAT_EQ(c.lr(1, 0, 4), 0.8f) << "the cosine starts where the warm-up ends";
  EXPECT_NEAR(c.lr(3, 0, 4), 0.4f, 1e-6) << "half way through the 4 epochs after the warm-up";
}

// ---- Step 11: the ready event between the compute stream and the communication thread --
// Exercise: write StreamPosition::record_current and StreamPosition::wait
// (core/stream_sync.cpp), which Reducer::launch uses: record an event on the calling
// thread's current stream; wait() blocks until the stream has reached it.

TEST(Step11, ReadyEventOrdersTheCommunicationThreadAfterTheKernel) {
  // Every kernel on the emulated device starts 20 ms late, as a GPU's queued work runs
  // after the host call returned; copies are not delayed.
  emu::set_task_delay_us(20000);
  Tensor g = Tensor::zeros({4}, DType::F32, Device::emu(0));
  // "Backward": a kernel queued on this thread's (compute) stream writes the gradient.
  emu::launch(0, [g]() mutable {
    for (int i = 0; i < 4; ++i) g.f32()[i] = 1.0f + static_cast<float>(i);
  });
  // The reducer's pattern: record where the compute stream is, hand that to the
  // communication thread, which waits for it before it reads the gradient.
  const StreamPosition ready = StreamPosition::record_current(g.device());
  std::vector<float> seen;
  std::thread comm([&] {
    ready.wait();
    seen = g.to(Device::cpu()).to_vector();  // a copy on this thread's own stream
  });
  comm.join();
  emu::set_task_delay_us(0);
  synchronize_current_stream(g.device());
  EXPECT_EQ(seen, (std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}))
      << "the communication thread read the gradient before the kernel that writes it ran";
}

}  // namespace
}  // namespace st::test
