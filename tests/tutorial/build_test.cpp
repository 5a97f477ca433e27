// The build-it-yourself steps (docs/tutorial/diy/) against the production code: the
// same gradients on every rank go through the step's exchange and through sparsetrain's
// Reducer, and the averaged gradients (and bucket plans) must agree. Runs on 2, 3 and 4
// ranks (ctest tutorial_build_stepN_npP).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "docs/tutorial/diy/diy.h"
#include "layers/flat_params.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/tutorial/params_layer.h"

namespace st::test {
namespace {

// Parameters of uneven sizes, registered first layer first; backward does nothing (the
// test announces the gradients, last parameter first, as a real backward would).
const std::vector<long> kSizes = {300, 20, 1000, 5, 64, 700, 16};

struct Params : ParamsLayer {
  Params() : ParamsLayer(kSizes) {}
};

// Rank r's gradient at iteration t: differs per rank, parameter, position and step.
diy::Grads gradients(int r, int t) {
  diy::Grads g(kSizes.size());
  for (size_t p = 0; p < kSizes.size(); ++p)
    for (long i = 0; i < kSizes[p]; ++i)
      g[p].push_back(static_cast<float>(std::sin(0.37 * i + 1.3 * p + 0.71 * r + 2.1 * t)));
  return g;
}

// The production exchange of the same gradients.
diy::Grads production(Reducer& reducer, FlatParams& flat, Params& net, const diy::Grads& g) {
  flat.zero_grads();
  reducer.begin_backward();
  for (size_t p = kSizes.size(); p-- > 0;) {
    float* dst = net.p(p).grad.f32();
    for (long i = 0; i < kSizes[p]; ++i) dst[i] = g[p][i];
    net.p(p).mark_grad_ready();
  }
  reducer.finalize();
  diy::Grads out(kSizes.size());
  for (size_t p = 0; p < kSizes.size(); ++p) out[p] = net.p(p).grad.to_vector();
  return out;
}

void expect_same(const diy::Grads& mine, const diy::Grads& theirs) {
  for (size_t p = 0; p < kSizes.size(); ++p)
    for (long i = 0; i < kSizes[p]; ++i)
      ASSERT_NEAR(mine[p][i], theirs[p][i], 1e-6) << "parameter " << p << ", position " << i;
}

void compare(const ReducerOptions& o, void (*exchange)(diy::Grads&, MPI_Comm)) {
  Params net;
  FlatParams flat(net, Device::cpu());
  Reducer reducer(flat, world(), std::make_shared<AllreduceHook>(), o);
  for (int t = 0; t < 3; ++t) {
    diy::Grads mine = gradients(world().rank(), t);
    const diy::Grads theirs = production(reducer, flat, net, mine);
    exchange(mine, MPI_COMM_WORLD);
    expect_same(mine, theirs);
  }
}

TEST(Build, Step1NaiveAllreduce) {
  ReducerOptions o;
  o.first_bucket_mb = o.bucket_cap_mb = 1e-9;  // page 2's naive flags
  o.defer_until_finalize = true;
  compare(o, diy::naive_exchange);
}

// 1 KiB first bucket, 4 KiB after: uneven buckets, and a parameter (p2) above the cap.
constexpr double kFirst = 1024.0, kCap = 4096.0;

void step2(diy::Grads& g, MPI_Comm comm) {
  std::vector<long> sizes(kSizes.begin(), kSizes.end());
  diy::bucketed_exchange(g, diy::plan_buckets(sizes, kFirst, kCap), comm);
}

TEST(Build, Step2BucketPlanMatchesTheReducers) {
  Params net;
  FlatParams flat(net, Device::cpu());
  ReducerOptions o;
  o.first_bucket_mb = kFirst / (1 << 20);
  o.bucket_cap_mb = kCap / (1 << 20);
  Reducer reducer(flat, world(), std::make_shared<AllreduceHook>(), o);
  const std::vector<diy::Bucket> plan = diy::plan_buckets(kSizes, kFirst, kCap);
  ASSERT_EQ(plan.size(), reducer.buckets().size());
  for (size_t b = 0; b < plan.size(); ++b) {
    EXPECT_EQ(plan[b].numel, reducer.buckets()[b].numel) << "bucket " << b;
    ASSERT_EQ(plan[b].params.size(), reducer.buckets()[b].params.size()) << "bucket " << b;
    for (size_t i = 0; i < plan[b].params.size(); ++i)
      EXPECT_EQ(param_name(plan[b].params[i]), reducer.buckets()[b].params[i]->name);
  }
}

TEST(Build, Step2BucketedAllreduce) {
  ReducerOptions o;
  o.first_bucket_mb = kFirst / (1 << 20);
  o.bucket_cap_mb = kCap / (1 << 20);
  compare(o, step2);
}

// Step 3: the same averages as step 2, and the first bucket leaves during backward.
void step3(diy::Grads& g, MPI_Comm comm) {
  diy::OverlapExchanger ex(g, diy::plan_buckets(kSizes, kFirst, kCap), comm);
  for (size_t p = kSizes.size(); p-- > 0;) {
    ex.grad_ready(static_cast<int>(p));
    if (p == kSizes.size() - 1) {
      EXPECT_EQ(ex.launched(), 1) << "the first bucket ({p6}) must leave at once";
    }
  }
  ex.finish();
}

TEST(Build, Step3OverlappedAllreduce) {
  ReducerOptions o;
  o.first_bucket_mb = kFirst / (1 << 20);
  o.bucket_cap_mb = kCap / (1 << 20);
  compare(o, step3);
}

// A sparsifier's exchange, step by step, through SparsifyHook and through a build-it-
// yourself step (`mine`, which returns its residual) on the same gradients of one
// 2000-element bucket at d = 0.01: the applied updates and the residuals must agree.
// `before` sees the hook's statistics of each step before `mine` runs.
template <class Mine, class Before>
void compare_sparse(const char* method, int steps, double scale, Mine mine, Before before) {
  Communicator& c = world();
  const int n = 2000;
  SparsifierOptions o;
  o.density = 0.01;
  SparsifyHook hook(make_sparsifier(method, o), o);
  Bucket b;
  b.numel = n;
  for (int t = 0; t < steps; ++t) {
    std::vector<float> g(n);
    for (int i = 0; i < n; ++i)
      g[i] = static_cast<float>(scale * std::sin(0.37 * i + 0.71 * c.rank() + 2.1 * t) *
                                (1.0 + 0.001 * i));
    Tensor theirs = Tensor::from_vector(g, {n});
    hook.exchange(b, theirs, c, t);
    before(hook.take_stats().at(0), t);
    const std::vector<float>& residual = mine(g);
    const std::vector<float> applied = theirs.to_vector(), kept = hook.residual(0).to_vector();
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(g[i], applied[i], 1e-6) << "step " << t << ", position " << i;
      ASSERT_NEAR(residual[i], kept[i], 1e-6) << "residual, step " << t << ", position " << i;
    }
  }
}

// Step 4 against Top-k, five steps.
TEST(Build, Step4TopkWithErrorFeedback) {
  std::vector<float> residual(2000, 0.0f);
  compare_sparse(
      "topk", 5, 1.0,
      [&](std::vector<float>& g) -> const std::vector<float>& {
        diy::topk_exchange(g, residual, 0.01, MPI_COMM_WORLD);
        return residual;
      },
      [](const SparsifyStats&, int) {});
}

// Step 5 against MiCRO, twelve steps: tau starts above every value, so the first steps
// send one fallback element each while the residuals grow; also the threshold used.
TEST(Build, Step5ThresholdRule) {
  diy::ThresholdState state;
  compare_sparse(
      "micro", 12, 0.05,
      [&](std::vector<float>& g) -> const std::vector<float>& {
        diy::threshold_exchange(g, state, 0.01, MPI_COMM_WORLD);
        return state.residual;
      },
      [&](const SparsifyStats& st, int t) {
        // tau_0 = 1 / (2 sqrt(k)), k = 20 here; afterwards the state's tau.
        const double used = state.tau < 0 ? 1.0 / (2.0 * std::sqrt(20.0)) : state.tau;
        EXPECT_NEAR(st.threshold, used, 1e-12) << "step " << t;
      });
}

}  // namespace
}  // namespace st::test
