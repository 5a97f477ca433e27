// The conformance suite every sparsifier passes, through SparsifyHook on the CPU
// implementation of bulk::Ops, on 1 process and under mpirun with 2 and 4 ranks.
// The checks themselves are the installed helper sparsify/testing/conformance.h (listed
// there); this suite runs them for every row of the registry, so a new method's row is
// enough to bring it here. Methods that ignore --density run at the default 0.01 too; the
// helper supplies the side inputs a row asks for (VGC's squared gradients).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "comm/communicator.h"
#include "core/rng.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "sparsify/testing/conformance.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/sparsify/heavy_tailed.h"

namespace st::test {
namespace {

class Conformance : public ::testing::TestWithParam<std::string> {};

// Every property is checked on every rank by the installed helper
// (sparsify/testing/conformance.h), which out-of-tree methods run too.
TEST_P(Conformance, ErrorFeedbackDensityAndRankAgreement) {
  conformance::Case c;
  c.method = GetParam();
  const conformance::Report report = conformance::check_conformance(c, world());
  EXPECT_TRUE(report.passed()) << report.summary();
  // Two buckets over eight steps: well over a hundred properties each.
  EXPECT_GT(report.checks, 100) << report.summary();
}

// A method that promises at least one position per rank but selects none, and whose
// state differs between ranks: the helper fails it and says why.
class SelectsNothing : public Sparsifier {
 public:
  std::string name() const override { return "conformance_test_broken"; }
  ExchangePattern pattern() const override { return ExchangePattern::UnionAllreduce; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer&,
                 DeviceSelection& out) override {
    ops.resize(out.indices, bulk::Elem::I32, 0);
    rank_ = ctx.rank;
  }
  double state_signature(int) const override { return 1.0 + rank_; }

 private:
  int rank_ = 0;
};

TEST(ConformanceHelper, FailsABrokenMethod) {
  static const SparsifierRegistrar broken(
      {"conformance_test_broken",
       "selects nothing (a test row)",
       {},
       {},
       [](const SpValues&) -> SparsifierPtr { return std::make_unique<SelectsNothing>(); }});
  conformance::Case c;
  c.method = "conformance_test_broken";
  c.steps = 2;
  const conformance::Report r = conformance::check_conformance(c, world());
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.summary().find("conformance_test_broken: step 0 bucket 0: empty selection"),
            std::string::npos)
      << r.summary();
  if (world().size() > 1) {
    EXPECT_NE(r.summary().find("the sparsifier state differs between ranks"), std::string::npos)
        << r.summary();
  }
}

// The report counts every check, keeps each failure as one line naming the method, and
// an unknown method is an error, not a pass.
TEST(ConformanceHelper, ReportsFailuresWithTheMethodName) {
  conformance::Report r;
  r.method = "example";
  EXPECT_TRUE(r.check(true, "never shown"));
  EXPECT_FALSE(r.check(false, "step ", 3, ": lost mass"));
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.checks, 2);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0], "example: step 3: lost mass");
  EXPECT_NE(r.summary().find("1 of 2 checks failed"), std::string::npos) << r.summary();
  conformance::Case bad;
  bad.method = "no-such-method";
  EXPECT_THROW(conformance::check_conformance(bad, world()), Error);
}

// Every row: built in, and any a linked file registered before main.
INSTANTIATE_TEST_SUITE_P(Sparsifiers, Conformance, ::testing::ValuesIn(sparsifier_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// Top-k's union grows with the ranks ("build-up"): on P > 1 ranks the actual density
// exceeds d; on one rank it equals d.
TEST(Sparsify, TopkBuildUpExceedsUserDensity) {
  Communicator& c = world();
  SparsifierOptions opt;
  opt.density = 0.01;
  SparsifyHook hook(make_sparsifier("topk", opt), opt);
  Bucket bucket;
  bucket.numel = 20000;
  Tensor g = gradient(bucket.numel, c.rank(), 0, 0);
  hook.exchange(bucket, g, c, 0);
  const SparsifyStats s = hook.take_stats().at(0);
  EXPECT_EQ(s.k, 200);
  if (c.size() == 1) {
    EXPECT_EQ(s.global_count, s.k);
  } else {
    EXPECT_GT(s.actual_density, opt.density) << "no build-up on " << c.size() << " ranks";
  }
}

// --sp ef=off: nothing is kept between steps. Each step's selection is the top-k of
// that step's gradient alone, the residual stays zero, and the statistics report the
// norm of what was dropped; with the default (ef=on) the dropped part comes back.
TEST(ErrorFeedbackOff, EachStepSelectsFromItsOwnGradientAlone) {
  Communicator& c = world();
  SparsifierOptions off;
  off.density = 0.05;
  off.params["ef"] = "off";
  SparsifierOptions on = off;
  on.params["ef"] = "on";
  SparsifyHook without(make_sparsifier("topk", off), off), with(make_sparsifier("topk", on), on);
  Bucket bucket;
  bucket.numel = 2000;
  for (int64_t t = 0; t < 3; ++t) {
    const Tensor g = gradient(bucket.numel, c.rank(), t, 0);
    // The k = 100 largest |g| of this step, as an independent reference.
    std::vector<int32_t> order(static_cast<size_t>(bucket.numel));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return std::abs(g.f32()[a]) > std::abs(g.f32()[b]);
    });
    const std::set<int32_t> top(order.begin(), order.begin() + 100);
    Tensor a = g.clone(), b = g.clone();
    without.exchange(bucket, a, c, t);
    with.exchange(bucket, b, c, t);
    // Dropped: x outside the positions this rank sent (the union of the ranks' top-k).
    const std::vector<int32_t> sent = without.last_result_indices(0);
    const std::set<int32_t> sent_set(sent.begin(), sent.end());
    double dropped = 0;
    for (int64_t i = 0; i < bucket.numel; ++i)
      if (!sent_set.count(static_cast<int32_t>(i))) dropped += double(g.f32()[i]) * g.f32()[i];
    const Selection sel = without.last_selection(0);
    EXPECT_EQ(std::set<int32_t>(sel.indices.begin(), sel.indices.end()), top) << "step " << t;
    const std::vector<float> r = without.residual(0).to_vector();
    EXPECT_TRUE(std::all_of(r.begin(), r.end(), [](float v) { return v == 0.0f; })) << t;
    const SparsifyStats st = without.take_stats().at(0);
    EXPECT_NEAR(st.residual_norm, std::sqrt(dropped), 1e-4 * std::sqrt(dropped)) << t;
    const SparsifyStats kept = with.take_stats().at(0);
    EXPECT_GT(kept.residual_norm, 0.0);
    if (t > 0) {
      // With the residual, earlier steps' skipped values change what is chosen.
      const Selection w = with.last_selection(0);
      EXPECT_NE(std::set<int32_t>(w.indices.begin(), w.indices.end()), top) << t;
    }
  }
  off.params["ef"] = "sometimes";
  EXPECT_THROW(make_sparsifier("topk", off), Error);
}

TEST(Sparsify, UnknownNameAndKeyAreClearErrors) {
  SparsifierOptions opt;
  EXPECT_THROW(make_sparsifier("topq", opt), Error);
  opt.params["nonsense"] = "1";
  try {
    make_sparsifier("topk", opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nonsense"), std::string::npos) << e.what();
  }
}

// Build-up: on P > 1 ranks local Top-k's union exceeds the user density
// (build-up) while CLT-k's leader indices keep it at exactly k/n.
TEST(Sparsify, TopkBuildsUpWhileCltkStaysAtK) {
  Communicator& c = world();
  SparsifierOptions opt;
  opt.density = 0.01;
  SparsifyHook topk(make_sparsifier("topk", opt), opt), cltk(make_sparsifier("cltk", opt), opt);
  Bucket bucket;
  bucket.numel = 20000;
  for (int64_t t = 0; t < 3; ++t) {
    Tensor g1 = gradient(bucket.numel, c.rank(), t, 0), g2 = g1.clone();
    topk.exchange(bucket, g1, c, t);
    cltk.exchange(bucket, g2, c, t);
    const SparsifyStats a = topk.take_stats().at(0), b = cltk.take_stats().at(0);
    EXPECT_EQ(b.global_count, b.k) << "CLT-k at t=" << t;
    EXPECT_DOUBLE_EQ(b.actual_density, static_cast<double>(b.k) / bucket.numel);
    if (c.size() > 1) {
      EXPECT_GT(a.actual_density, opt.density) << "no Top-k build-up on " << c.size() << " ranks";
    }
    if (c.rank() == 0 && t == 0)
      std::printf("[ density  ] P=%d d=%.4f topk actual=%.4f cltk actual=%.4f\n", c.size(),
                  opt.density, a.actual_density, b.actual_density);
  }
}

}  // namespace
}  // namespace st::test
