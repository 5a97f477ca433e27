// The build-it-yourself steps (docs/tutorial/diy/) against known results: the gradients
// are a known function of rank, parameter, position and step, so each rank computes every
// rank's expected result itself (tests/tutorial/diy_reference.h) and compares its step's
// exchange with it. No library code is in the reference, so a page's exercise left
// unfinished in the tree cannot fail a correct step. Runs on 2, 3 and 4 ranks (ctest
// tutorial_build_stepN_npP); tests/tutorial/mutants.py checks each step's test catches
// its wrong answers.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <vector>

#include "docs/tutorial/diy/diy.h"
#include "tests/tutorial/diy_reference.h"

namespace st::test {
namespace {

// Parameters of uneven sizes, registered first layer first.
const std::vector<long> kSizes = {300, 20, 1000, 5, 64, 700, 16};

int rank_count() {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  return P;
}

int my_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Rank r's gradient at iteration t: differs per rank, parameter, position and step.
diy::Grads gradients(int r, int t) {
  diy::Grads g(kSizes.size());
  for (size_t p = 0; p < kSizes.size(); ++p)
    for (long i = 0; i < kSizes[p]; ++i)
      g[p].push_back(static_cast<float>(std::sin(0.37 * i + 1.3 * p + 0.71 * r + 2.1 * t)));
  return g;
}

// Every parameter's gradient averaged over the ranks, worked out from all ranks' inputs.
void expect_average(const diy::Grads& mine, int t) {
  const int P = rank_count();
  for (size_t p = 0; p < kSizes.size(); ++p) {
    std::vector<std::vector<float>> per_rank;
    for (int r = 0; r < P; ++r) per_rank.push_back(gradients(r, t)[p]);
    const std::vector<double> avg = diy_ref::average(per_rank);
    for (long i = 0; i < kSizes[p]; ++i)
      ASSERT_NEAR(mine[p][i], avg[i], 1e-6) << "parameter " << p << ", position " << i;
  }
}

void check_dense(void (*exchange)(diy::Grads&, MPI_Comm)) {
  for (int t = 0; t < 3; ++t) {
    diy::Grads mine = gradients(my_rank(), t);
    exchange(mine, MPI_COMM_WORLD);
    expect_average(mine, t);
  }
}

TEST(Build, Step1NaiveAllreduce) {
  check_dense(diy::naive_exchange);
}

// 1 KiB first bucket, 4 KiB after: uneven buckets, and a parameter (p2) above the cap.
constexpr double kFirst = 1024.0, kCap = 4096.0;

// Worked out by hand from kSizes in bytes (p0..p6: 1200, 80, 4000, 20, 256, 2800, 64),
// last parameter first: {p6} (64 B; p5 would pass the 1 KiB first cap), {p5, p4, p3}
// (3076 B; p2 would pass 4 KiB), {p2, p1} (4080 B), {p0}.
const std::vector<std::vector<int>> kPlan = {{6}, {5, 4, 3}, {2, 1}, {0}};

TEST(Build, Step2BucketPlanWorkedOutByHand) {
  const std::vector<diy::Bucket> plan = diy::plan_buckets(kSizes, kFirst, kCap);
  ASSERT_EQ(plan.size(), kPlan.size());
  for (size_t b = 0; b < plan.size(); ++b) {
    EXPECT_EQ(plan[b].params, kPlan[b]) << "bucket " << b;
    long numel = 0;
    for (int p : kPlan[b]) numel += kSizes[p];
    EXPECT_EQ(plan[b].numel, numel) << "bucket " << b;
  }
}

void step2(diy::Grads& g, MPI_Comm comm) {
  diy::bucketed_exchange(g, diy::plan_buckets(kSizes, kFirst, kCap), comm);
}

TEST(Build, Step2BucketedAllreduce) {
  check_dense(step2);
}

// Step 3: the announcements come as a backward with a parameter used early in the model
// and again late (say a tied embedding) would make them: p6 first, then p0, so the last
// bucket {p0} completes before buckets 1 and 2, and bucket 2 before bucket 1. Every rank
// must launch the buckets in bucket order (page 3): after each announcement, how many
// buckets have left.
const std::vector<int> kAnnounce = {6, 0, 2, 1, 5, 4, 3};
const std::vector<int> kLaunchedAfter = {1, 1, 1, 1, 1, 1, 4};

void step3(diy::Grads& g, MPI_Comm comm) {
  diy::OverlapExchanger ex(g, diy::plan_buckets(kSizes, kFirst, kCap), comm);
  for (size_t a = 0; a < kAnnounce.size(); ++a) {
    ex.grad_ready(kAnnounce[a]);
    EXPECT_EQ(ex.launched(), kLaunchedAfter[a])
        << "buckets launched after announcing p" << kAnnounce[a]
        << " (a complete bucket waits for the ones before it)";
  }
  ex.finish();
}

TEST(Build, Step3OverlappedAllreduceInBucketOrder) {
  check_dense(step3);
}

// A sparsifier's exchange of one 2000-element bucket at d = 0.01 over `steps` steps:
// this rank's update and residual after each step against the reference's, which runs
// every rank's choice (`choose(r, x)`) itself. `mine` exchanges g and returns the residual;
// `after(t, sent)` sees the union's size of step t.
template <class Mine, class Choose, class After>
void check_sparse(int steps, double scale, Mine mine, Choose choose, After after) {
  const int P = rank_count(), me = my_rank(), n = 2000;
  auto gradient = [&](int r, int t) {
    std::vector<float> g(n);
    for (int i = 0; i < n; ++i)
      g[i] =
          static_cast<float>(scale * std::sin(0.37 * i + 0.71 * r + 2.1 * t) * (1.0 + 0.001 * i));
    return g;
  };
  diy_ref::UnionExchange ref;
  for (int t = 0; t < steps; ++t) {
    std::vector<std::vector<float>> all;
    for (int r = 0; r < P; ++r) all.push_back(gradient(r, t));
    std::vector<float> g = all[me];
    const std::vector<float>& residual = mine(g);
    const long sent = ref.step(all, choose);
    after(t, sent);
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(g[i], ref.applied[i], 1e-6) << "step " << t << ", position " << i;
      ASSERT_NEAR(residual[i], ref.residual[me][i], 1e-6)
          << "residual, step " << t << ", position " << i;
    }
  }
}

// Step 4: Top-k with error feedback, five steps.
TEST(Build, Step4TopkWithErrorFeedback) {
  std::vector<float> residual(2000, 0.0f);
  check_sparse(
      5, 1.0,
      [&](std::vector<float>& g) -> const std::vector<float>& {
        diy::topk_exchange(g, residual, 0.01, MPI_COMM_WORLD);
        return residual;
      },
      [](int, const std::vector<float>& x) { return diy_ref::topk(x, 20); }, [](int, long) {});
}

// Step 5: MiCRO's rule, twelve steps: tau starts above every value, so the first steps
// send one fallback element each while the residuals grow; also the threshold after each.
TEST(Build, Step5ThresholdRule) {
  diy::ThresholdState state;
  diy_ref::Micro micro(2000, 0.01);
  const int P = rank_count();
  check_sparse(
      12, 0.05,
      [&](std::vector<float>& g) -> const std::vector<float>& {
        diy::threshold_exchange(g, state, 0.01, MPI_COMM_WORLD);
        return state.residual;
      },
      [&](int r, const std::vector<float>& x) { return micro.choose(r, P, x); },
      [&](int t, long sent) {
        micro.advance(sent);
        EXPECT_NEAR(state.tau, micro.tau, 1e-12) << "tau after step " << t;
      });
}

// Step 6: three sharded SGD steps against plain SGD with momentum on the averaged
// gradient, worked out here on all the parameters; n = 1003 so the shards are unequal on
// 2, 3 and 4 ranks. Each rank keeps the momentum of its shard only.
TEST(Build, Step6ShardedOptimizerState) {
  const int P = rank_count(), me = my_rank();
  const long n = 1003;
  auto gradient = [&](int r, int t) {
    std::vector<float> g(n);
    for (long i = 0; i < n; ++i) g[i] = static_cast<float>(std::sin(0.37 * i + 0.71 * r + 2.1 * t));
    return g;
  };
  std::vector<float> params(n), ref_params(n);
  for (long i = 0; i < n; ++i) params[i] = ref_params[i] = static_cast<float>(std::cos(0.1 * i));
  std::vector<double> ref_velocity(n, 0.0);
  diy::ShardedSgd opt;
  for (int t = 0; t < 3; ++t) {
    diy::sharded_sgd_step(params, gradient(me, t), opt, MPI_COMM_WORLD);
    std::vector<std::vector<float>> all;
    for (int r = 0; r < P; ++r) all.push_back(gradient(r, t));
    const std::vector<double> avg = diy_ref::average(all);
    for (long i = 0; i < n; ++i) {
      ref_velocity[i] = opt.momentum * ref_velocity[i] + avg[i];
      ref_params[i] = static_cast<float>(ref_params[i] - opt.lr * ref_velocity[i]);
    }
    for (long i = 0; i < n; ++i)
      ASSERT_NEAR(params[i], ref_params[i], 1e-5) << "step " << t << ", parameter " << i;
  }
  // The memory ZeRO-1 saves: this rank's momentum covers n / P elements (one more on the
  // first n mod P ranks), not n.
  EXPECT_EQ(static_cast<long>(opt.velocity.size()), n / P + (me < n % P ? 1 : 0));
}

}  // namespace
}  // namespace st::test
