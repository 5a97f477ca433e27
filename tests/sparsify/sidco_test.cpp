// SIDCo (Abdelmoniem et al., MLSys 2021): the estimators, the achieved/target density
// table of docs/ALGORITHMS.md (SIDCo) on synthetic Laplace and Student-t(3) data, and the
// direction of the adaptive stage rule.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "sparsify/host_select.h"
#include "sparsify/registry.h"
#include "sparsify/sidco.h"
#include "sparsify/sidco_fit.h"
#include "tests/sparsify/host_forms.h"

namespace st::test {
namespace {

using sidco::Variant;

constexpr int64_t kSamples = 2'000'000;  // the table came from 200k; we use 10x

// Laplace(0, 1) by inversion of a Philox uniform.
std::vector<float> laplace(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) {
    const double u = (static_cast<double>(rng.uniform()) + 0x1p-25) - 0.5;  // (-0.5, 0.5)
    v = static_cast<float>(-std::copysign(std::log(1.0 - 2.0 * std::abs(u)), u));
  }
  return x;
}

// Student-t with 3 degrees of freedom: Z / sqrt(chi2_3 / 3).
std::vector<float> student_t3(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) {
    const double z = rng.normal();
    double chi = 0;
    for (int j = 0; j < 3; ++j) {
      const double g = rng.normal();
      chi += g * g;
    }
    v = static_cast<float>(z / std::sqrt(chi / 3.0));
  }
  return x;
}

// Achieved / target density of one estimate on x.
double ratio(const std::vector<float>& x, Variant v, int stages, double delta) {
  sidco::Workspace ws;
  const int64_t n = static_cast<int64_t>(x.size());
  const sidco::Estimate e = sidco_estimate(x.data(), n, v, stages, delta, ws);
  std::vector<int32_t> sel;
  sidco_select_above(x.data(), n, e, ws, sel);
  return static_cast<double>(sel.size()) / (delta * static_cast<double>(n));
}

TEST(SidcoFit, ExponentialThresholdIsTheExactTailQuantile) {
  // P(A > -mu ln delta) = delta for an exponential law of mean mu.
  EXPECT_NEAR(sidco::exponential_threshold(2.0, 0.01), -2.0 * std::log(0.01), 1e-12);
}

TEST(SidcoFit, ParetoThresholdInvertsTheGeneralizedParetoTail) {
  // GPD(shape xi, scale sigma): mean sigma/(1-xi), var sigma^2/((1-xi)^2 (1-2xi)); the
  // tail quantile is sigma/xi (delta^-xi - 1). Moments in, exact quantile out.
  const double xi = 0.25, sigma = 1.5, delta = 0.001;
  const double mean = sigma / (1 - xi), var = sigma * sigma / ((1 - xi) * (1 - xi) * (1 - 2 * xi));
  EXPECT_NEAR(sidco::pareto_threshold(mean, var, delta), sigma / xi * (std::pow(delta, -xi) - 1.0),
              1e-9);
  // xi = 0 (mean^2 = var) is the exponential law.
  EXPECT_NEAR(sidco::pareto_threshold(2.0, 4.0, delta), -2.0 * std::log(delta), 1e-9);
}

TEST(SidcoFit, GammaThresholdOnExponentialMomentsIsTheExponentialQuantile) {
  // Exponential = gamma(shape 1): E ln A = ln(mean) - Euler's gamma; Minka's closed
  // form gives alpha ~ 1 (within ~1.5%), so the threshold is close to -mean ln delta.
  const double mean = 0.5, euler = 0.5772156649015329;
  const double eta = sidco::gamma_threshold(mean, std::log(mean) - euler, 0.01);
  EXPECT_NEAR(eta / (-mean * std::log(0.01)), 1.0, 0.03);
}

TEST(SidcoFit, StageCapAndLaterStageDelta) {
  EXPECT_EQ(sidco::max_stages(0.01), 7);
  EXPECT_EQ(sidco::max_stages(0.001), 10);
  EXPECT_EQ(sidco::max_stages(0.5), 1);
  // (delta / 0.25)^(1/(M-1)): M - 1 later stages multiply to delta / 0.25.
  EXPECT_NEAR(std::pow(sidco::later_stage_delta(0.001, 4), 3) * 0.25, 0.001, 1e-15);
}

// stages = 0: every stage keeps 0.25 of the previous exceedances, the last the rest.
TEST(SidcoFit, FixedRatioStagesFollowFromDelta) {
  using D = std::vector<double>;
  EXPECT_EQ(sidco::stage_deltas(0.3, 0), D{0.3});
  EXPECT_EQ(sidco::stage_deltas(0.25, 0), D{0.25});
  EXPECT_EQ(sidco::stage_deltas(0.0625, 0), (D{0.25, 0.25}));  // 0.25^2: two stages
  const D d = sidco::stage_deltas(0.001, 0);                   // ceil(4.98) = 5 stages
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[3], 0.25);
  EXPECT_NEAR(d[4], 0.001 / std::pow(0.25, 4), 1e-15);  // 0.256
  EXPECT_GE(d[4], 0.25);
  // Fixed M: [0.25, (delta/0.25)^(1/(M-1)) x (M-1)]; M = 1 or delta >= 0.25: [delta].
  EXPECT_EQ(sidco::stage_deltas(0.001, 1), D{0.001});
  EXPECT_EQ(sidco::stage_deltas(0.3, 3), D{0.3});
  const D f = sidco::stage_deltas(0.001, 3);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], 0.25);
  EXPECT_EQ(f[2], sidco::later_stage_delta(0.001, 3));
  // On Laplace data the fixed-ratio estimate runs its 5 stages and lands near delta; the
  // sparsifier takes stages=0 and never adapts it.
  const std::vector<float> x = laplace(200000, 9);
  sidco::Workspace ws;
  const sidco::Estimate e = sidco_estimate(x.data(), 200000, Variant::E, 0, 0.001, ws);
  EXPECT_EQ(e.stages, 5);
  const double r = ratio(x, Variant::E, 0, 0.001);
  EXPECT_GT(r, 0.7);
  EXPECT_LT(r, 1.4);
  SparsifierOptions o;
  o.params = {{"stages", "0"}};
  Sidco sp(Sidco::from(o, Variant::E));
  SelectContext ctx;
  ctx.density = 0.001;
  ctx.k = 200;
  Selection sel;
  ExchangeFeedback fb;
  fb.k = 200;
  fb.rank_counts = {2000};  // 10x over target, every window: would move an adaptive M
  for (int t = 0; t < 20; ++t) {
    select_on_host(sp, ctx, x.data(), 200000, sel);
    sp.observe(fb);
  }
  EXPECT_EQ(sp.stages(0), 0);
}

TEST(SidcoFit, SelectionIsStrictAndExact) {
  // |x| > tau, never >=: a value equal to the threshold stays.
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 1.0f, -3.0f};
  sidco::Estimate e;
  e.tau = 1.0f;
  sidco::Workspace ws;
  std::vector<int32_t> out;
  sidco_select_above(x.data(), 5, e, ws, out);
  EXPECT_EQ(out, (std::vector<int32_t>{2, 4}));
}

TEST(SidcoFit, ZeroBufferSelectsNothing) {
  std::vector<float> x(1000, 0.0f);
  EXPECT_EQ(ratio(x, Variant::E, 2, 0.01), 0.0);
}

TEST(SidcoFit, ResultDoesNotDependOnTheThreadCount) {
  const std::vector<float> x = student_t3(300'000, 5);
  for (Variant v : {Variant::E, Variant::P, Variant::GP}) {
    sidco::Workspace ws;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const sidco::Estimate one = sidco_estimate(x.data(), 300'000, v, 3, 0.001, ws);
    omp_set_num_threads(2);
    const sidco::Estimate two = sidco_estimate(x.data(), 300'000, v, 3, 0.001, ws);
    omp_set_num_threads(saved);
    EXPECT_EQ(one.tau, two.tau) << sidco::variant_name(v);
  }
}

// docs/ALGORITHMS.md, SIDCo, "Expected achieved/target density" (200k samples).
struct Cell {
  const char* data;
  double delta;
  Variant v;
  int stages;
  double expected;
};
const Cell kTable[] = {
    {"laplace", 0.01, Variant::E, 1, 0.99},  {"laplace", 0.01, Variant::E, 2, 1.00},
    {"laplace", 0.01, Variant::E, 3, 0.98},  {"laplace", 0.01, Variant::P, 1, 0.99},
    {"laplace", 0.01, Variant::P, 2, 0.99},  {"laplace", 0.01, Variant::P, 3, 0.98},
    {"laplace", 0.001, Variant::E, 1, 1.07}, {"laplace", 0.001, Variant::E, 2, 1.12},
    {"laplace", 0.001, Variant::E, 3, 1.06}, {"laplace", 0.001, Variant::P, 1, 1.07},
    {"laplace", 0.001, Variant::P, 2, 1.06}, {"laplace", 0.001, Variant::P, 3, 1.00},
    {"t3", 0.01, Variant::E, 1, 1.50},       {"t3", 0.01, Variant::E, 2, 1.20},
    {"t3", 0.01, Variant::E, 3, 0.67},       {"t3", 0.01, Variant::P, 1, 0.86},
    {"t3", 0.01, Variant::P, 2, 0.94},       {"t3", 0.01, Variant::P, 3, 0.97},
    {"t3", 0.001, Variant::E, 1, 4.95},      {"t3", 0.001, Variant::E, 2, 3.65},
    {"t3", 0.001, Variant::E, 3, 1.17},      {"t3", 0.001, Variant::P, 1, 1.54},
    {"t3", 0.001, Variant::P, 2, 0.99},      {"t3", 0.001, Variant::P, 3, 0.95},
};

// Cells that stay outside 15% on 2M samples (seed 2021), with the value we measure; the
// reason is in docs/results/sidco_vgc_fft.md. The test pins these values so a change in
// the estimator shows up here.
struct Exception {
  const char* data;
  double delta;
  Variant v;
  int stages;
  double measured;
};
const std::vector<Exception> kExceptions = {
    // None at present: on 2M samples every cell is within 15% (the largest gap, -11.0%,
    // is Laplace, delta 0.001, E, M = 2; docs/results/sidco_vgc_fft.md).
};

const Exception* find_exception(const Cell& c) {
  for (const Exception& e : kExceptions)
    if (std::string(e.data) == c.data && e.delta == c.delta && e.v == c.v && e.stages == c.stages)
      return &e;
  return nullptr;
}

TEST(SidcoTable, ReproducesAchievedOverTargetDensity) {
  const std::vector<float> lap = laplace(kSamples, 2021), t3 = student_t3(kSamples, 2021);
  for (const Cell& c : kTable) {
    const double r = ratio(std::string(c.data) == "laplace" ? lap : t3, c.v, c.stages, c.delta);
    std::printf("%-8s delta %-6g %s M=%d: measured %.3f expected %.2f (%+.1f%%)\n", c.data, c.delta,
                sidco::variant_name(c.v), c.stages, r, c.expected, 100.0 * (r / c.expected - 1.0));
    const Exception* ex = find_exception(c);
    if (ex) {
      EXPECT_GT(std::abs(r / c.expected - 1.0), 0.15) << "exception now holds: remove it";
      EXPECT_NEAR(r, ex->measured, 0.05 * ex->measured) << "exception moved";
    } else {
      EXPECT_NEAR(r / c.expected, 1.0, 0.15)
          << c.data << " delta " << c.delta << " " << sidco::variant_name(c.v) << " M=" << c.stages;
    }
  }
}

// The gamma-then-Pareto variant has no row in the table; its values are recorded in the
// doc. The gamma stage alone under-estimates heavy tails (Student-t(3), M = 1: ~1.5x at
// delta 0.01, ~5x at 0.001); from M = 2 the Pareto stages bring it within 20%.
TEST(SidcoTable, GammaParetoVariant) {
  const std::vector<float> lap = laplace(kSamples, 2021), t3 = student_t3(kSamples, 2021);
  for (double delta : {0.01, 0.001})
    for (int m = 1; m <= 3; ++m) {
      const double rl = ratio(lap, Variant::GP, m, delta), rt = ratio(t3, Variant::GP, m, delta);
      std::printf("delta %-6g GP M=%d: laplace %.3f t3 %.3f\n", delta, m, rl, rt);
      EXPECT_NEAR(rl, 1.0, 0.1);
      if (m == 1) {
        EXPECT_GT(rt, 1.2);
      } else {
        EXPECT_NEAR(rt, 1.0, 0.2);
      }
    }
}

// The adaptive rule's direction (not settled by the paper; docs/ALGORITHMS.md, SIDCo).
// Each iteration selects on a fresh window of Student-t(3) gradients with the current M
// and feeds the count back; after a burn-in, compare how far achieved/target stays from
// 1 under each direction.
// Measured ratio against M (2M samples; docs/results/sidco_vgc_fft.md):
//   E, delta 0.01:  1.47 1.17 0.67 0.51 ...   (falls with M: +1 is right)
//   E, delta 0.001: 4.72 3.58 1.16 0.65 ...   (falls with M: +1 is right)
//   P, delta 0.01:  0.84 0.92 0.97 1.00 ...   (rises toward 1: under-selection wants more M)
//   P, delta 0.001: 1.45 0.95 0.92 0.95 ...   (over-selection at M = 1: +1 is right)
struct AdaptRun {
  double mean_ratio = 0, mean_abs_log = 0;
  int final_m = 0;
};
const std::vector<float>& t3_pool() {
  static const std::vector<float> pool = student_t3(4'000'000, 77);
  return pool;
}
AdaptRun run_adaptive(Variant v, double delta, int direction) {
  SparsifierOptions o;
  o.params = {{"adapt", direction == Sidco::kAuto ? "auto" : std::to_string(direction)}};
  Sidco sp(Sidco::from(o, v));
  const int64_t n = 200'000, iters = 60, burn_in = 20;
  const std::vector<float>& pool = t3_pool();
  SelectContext ctx;
  ctx.density = delta;
  ctx.k = static_cast<int64_t>(delta * n);
  AdaptRun run;
  for (int64_t t = 0; t < iters; ++t) {
    const float* x = pool.data() + (t * 1'000'003) % (static_cast<int64_t>(pool.size()) - n);
    ctx.iteration = t;
    Selection sel;
    select_on_host(sp, ctx, x, n, sel);
    const int64_t c = static_cast<int64_t>(sel.indices.size());
    sp.observe({0, t, n, ctx.k, c, {c}});
    if (t >= burn_in) {
      const double r = static_cast<double>(c) / ctx.k;
      run.mean_ratio += r / (iters - burn_in);
      run.mean_abs_log += std::abs(std::log(r)) / (iters - burn_in);
    }
  }
  run.final_m = sp.stages(0);
  return run;
}

TEST(SidcoAdaptive, RaisingStagesOnOverSelectionBringsTheRatioTowardOne) {
  for (Variant v : {Variant::E, Variant::P})
    for (double delta : {0.01, 0.001}) {
      const AdaptRun up = run_adaptive(v, delta, +1), down = run_adaptive(v, delta, -1);
      std::printf("%s delta %g: +1 -> ratio %.3f |ln| %.3f M=%d; -1 -> ratio %.3f |ln| %.3f M=%d\n",
                  sidco::variant_name(v), delta, up.mean_ratio, up.mean_abs_log, up.final_m,
                  down.mean_ratio, down.mean_abs_log, down.final_m);
      // The implemented direction ends inside the band everywhere.
      EXPECT_GT(up.mean_ratio, 0.8) << sidco::variant_name(v) << " delta " << delta;
      EXPECT_LT(up.mean_ratio, 1.2) << sidco::variant_name(v) << " delta " << delta;
      if (v == Variant::P && delta == 0.01) {
        // The one case where the fit under-selects at M = 1 (0.84, inside the band) and
        // more stages raise it: -1 drifts to M = 2 on noisy windows and lands slightly
        // closer to 1. Both stay in the band; recorded in the doc.
        EXPECT_GT(down.mean_ratio, 0.8);
      } else {
        // Over-selection at M = 1: only +1 brings the ratio back to 1; -1 stays at M = 1.
        EXPECT_LT(up.mean_abs_log, down.mean_abs_log) << sidco::variant_name(v) << " " << delta;
        EXPECT_GT(down.mean_ratio, 1.3) << sidco::variant_name(v) << " " << delta;
      }
    }
}

// With error feedback the selected input is x = g + residual, where each residual grows
// until it crosses the last threshold and is reset: a light, truncated tail. The fits
// then under-select at M = 1 and only raising M on under-selection (-1) helps, the
// reverse of the heavy-tail case above. The default `auto` turns round when blocked or
// when a move makes the ratio worse, so it ends in the band in both cases. Measured
// mean achieved/target over iterations 100-299 (docs/results/sidco_vgc_fft.md).
double error_feedback_ratio(Variant v, const std::string& adapt) {
  SparsifierOptions o;
  o.params = {{"adapt", adapt}};
  Sidco sp(Sidco::from(o, v));
  const int64_t n = 100'000, iters = 300, from = 100;
  const double delta = 0.01;
  const std::vector<float>& pool = t3_pool();
  std::vector<float> x(n, 0.0f);
  SelectContext ctx;
  ctx.density = delta;
  ctx.k = static_cast<int64_t>(delta * n);
  double sum = 0;
  for (int64_t t = 0; t < iters; ++t) {
    // This step's gradient: heavy-tailed, a fresh window each step, added to the residual.
    const float* g = pool.data() + (t * 7'919) % (static_cast<int64_t>(pool.size()) - n);
    for (int64_t i = 0; i < n; ++i) x[i] += 0.01f * g[i];
    ctx.iteration = t;
    Selection sel;
    select_on_host(sp, ctx, x.data(), n, sel);
    for (int32_t i : sel.indices) x[i] = 0.0f;  // sent: the residual keeps nothing
    const int64_t c = static_cast<int64_t>(sel.indices.size());
    sp.observe({0, t, n, ctx.k, c, {c}});
    if (t >= from) sum += static_cast<double>(c) / ctx.k;
  }
  return sum / (iters - from);
}

TEST(SidcoAdaptive, UnderErrorFeedbackAutoTurnsRoundAndEndsInTheBand) {
  for (Variant v : {Variant::E, Variant::P}) {
    const double up = error_feedback_ratio(v, "1"), down = error_feedback_ratio(v, "-1"),
                 automatic = error_feedback_ratio(v, "auto");
    std::printf("%s, error feedback, delta 0.01: +1 %.3f, -1 %.3f, auto %.3f\n",
                sidco::variant_name(v), up, down, automatic);
    // The exponential fit collapses with +1 (0.002 of the target, as in training); the
    // Pareto fit's bounded shape (kappa > 0) follows the truncated tail better.
    if (v == Variant::E) {
      EXPECT_LT(up, 0.1) << "+1 should under-select here";
    }
    EXPECT_NEAR(down, 1.0, 0.25) << sidco::variant_name(v);
    EXPECT_NEAR(automatic, 1.0, 0.25) << sidco::variant_name(v);
  }
}

TEST(SidcoAdaptive, AutoFollowsTheHeavyTailDirection) {
  for (double delta : {0.01, 0.001}) {
    const AdaptRun a = run_adaptive(Variant::E, delta, Sidco::kAuto);
    std::printf("E delta %g: auto -> ratio %.3f M=%d\n", delta, a.mean_ratio, a.final_m);
    EXPECT_GT(a.mean_ratio, 0.8) << delta;
    EXPECT_LT(a.mean_ratio, 1.2) << delta;
  }
}

TEST(SidcoAdaptive, RuleStepsWithinTheBandAndClamps) {
  EXPECT_EQ(Sidco::adapt_stages(1, 1.5, +1, 0.2, 7), 2);
  EXPECT_EQ(Sidco::adapt_stages(2, 0.5, +1, 0.2, 7), 1);
  EXPECT_EQ(Sidco::adapt_stages(2, 1.1, +1, 0.2, 7), 2);
  EXPECT_EQ(Sidco::adapt_stages(7, 3.0, +1, 0.2, 7), 7);
  EXPECT_EQ(Sidco::adapt_stages(1, 0.1, +1, 0.2, 7), 1);
  EXPECT_EQ(Sidco::adapt_stages(3, 1.5, -1, 0.2, 7), 2);
  EXPECT_EQ(Sidco::adapt_stages(3, 1.5, 0, 0.2, 7), 3);
}

TEST(SidcoRegistry, ThreeVariantsAndTheirKeys) {
  SparsifierOptions o;
  o.params = {{"stages", "2"}, {"adapt", "0"}};
  for (const char* name : {"sidco-e", "sidco-p", "sidco-gp"}) {
    SparsifierPtr s = make_sparsifier(name, o);
    EXPECT_EQ(s->name(), name);
    EXPECT_EQ(s->pattern(), ExchangePattern::AllgatherSum);
  }
  o.params = {{"adapt", "auto"}};
  EXPECT_NO_THROW(make_sparsifier("sidco-e", o));
  o.params = {{"adapt", "3"}};
  EXPECT_THROW(make_sparsifier("sidco-e", o), Error);
  // 2 is auto's internal code, not a value of the flag.
  o.params = {{"adapt", "2"}};
  EXPECT_THROW(make_sparsifier("sidco-e", o), Error);
  o.params = {{"adapt", "sometimes"}};
  EXPECT_THROW(make_sparsifier("sidco-e", o), Error);
}

}  // namespace
}  // namespace st::test
