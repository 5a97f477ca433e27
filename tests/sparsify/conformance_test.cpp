// The conformance suite every sparsifier passes, through SparsifyHook on the CPU
// implementation of bulk::Ops, on 1 process and under mpirun with 2
// and 4 ranks (docs/ALGORITHMS.md, "Notation and shared machinery"):
//   - the averaged update is identical on every rank and equals the dense reference
//     computed from the ranks' contributions (x - residual after the exchange);
//   - union-style patterns contribute x at every result position and nothing elsewhere;
//     allgather-sum contributes only at the rank's own selection;
//   - error feedback loses nothing: sum_t P*update_t + sum_r residual_r = sum_{t,r} grad;
//   - counts, actual density and bytes are accounted; selections are in range, unique,
//     and never empty when the method promises to send something;
//   - the rule's state agrees on every rank;
//   - the phase timers are non-negative and add up to no more than the exchange (and the
//     exchange, error feedback and selection to no more than the whole call); the logged
//     residual norm is the norm of the residual.
// Adding a sparsifier = one line in kMethods.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "comm/communicator.h"
#include "core/rng.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/sparsify/heavy_tailed.h"

namespace st::test {
namespace {

struct Method {
  const char* name;
  double density;
  std::map<std::string, std::string> params;
};

const Method kMethods[] = {
    {"dense", 1.0, {}},
    {"topk", 0.01, {}},
    {"gtopk", 0.01, {}},
    {"micro", 0.01, {}},
    {"exdyna", 0.01, {}},
    {"sidco-e", 0.01, {}},  // fitted thresholds, variance rule, transforms, quantisers
    {"sidco-p", 0.01, {}},
    {"sidco-gp", 0.01, {}},
    {"vgc", 0.01, {{"batch", "1"}}},  // g^2 / B fallback with B = 1: v ~ g^2
    {"fft", 0.01, {}},
    {"qsgd", 1.0, {}},
    {"terngrad", 1.0, {}},
    {"cltk", 0.01, {}},  // the baselines from here on
    {"randomk", 0.01, {}},
    {"hard_threshold", 0.01, {}},
    {"gaussiank", 0.01, {}},
    {"dgc", 0.01, {}},
    {"redsync", 0.01, {}},
    {"sage", 0.01, {}},
    {"powersgd", 0.01, {}},  // low rank: two allreduces, decoded own contribution
    {"signsgd", 1.0, {}},    // 1 bit per element, packed
};

// The phases of one exchange (sparsify_hook.h): non-negative, disjoint, inside their total.
void expect_phases_consistent(const SparsifyStats& s) {
  for (double ms : {s.ef_ms, s.select_ms, s.partition_ms, s.estimate_ms, s.pack_ms, s.comm_ms,
                    s.decode_ms, s.update_ms, s.exchange_ms, s.total_ms})
    EXPECT_GE(ms, 0.0);
  const double slack = 1e-6;  // rounding of the millisecond sums
  EXPECT_LE(s.pack_ms + s.comm_ms + s.decode_ms + s.update_ms, s.exchange_ms + slack)
      << "pack " << s.pack_ms << " comm " << s.comm_ms << " decode " << s.decode_ms << " update "
      << s.update_ms << " exchange " << s.exchange_ms;
  EXPECT_LE(s.ef_ms + s.select_ms + s.exchange_ms, s.total_ms + slack);
  EXPECT_LE(s.partition_ms + s.estimate_ms, s.select_ms + slack);
}

Communicator& world() {
  static std::unique_ptr<Communicator> comm = make_communicator("auto");
  return *comm;
}

std::vector<double> sum_over_ranks(const std::vector<double>& v) {
  // Through float pairs: allreduce_scalar per element would be slow; sum in double on
  // a gathered copy instead.
  Communicator& c = world();
  const int64_t n = static_cast<int64_t>(v.size());
  Tensor mine = Tensor::empty({n}), all = Tensor::empty({n * c.size()});
  for (int64_t i = 0; i < n; ++i) mine.f32()[i] = static_cast<float>(v[i]);
  c.allgather(mine, all);
  std::vector<double> out(n, 0.0);
  for (int r = 0; r < c.size(); ++r)
    for (int64_t i = 0; i < n; ++i) out[i] += all.f32()[r * n + i];
  return out;
}

void expect_same_on_all_ranks(const std::vector<float>& v, const std::string& what) {
  Communicator& c = world();
  Tensor mx = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}), mn = mx.clone();
  c.allreduce(mx, ReduceOp::Max);
  c.allreduce(mn, ReduceOp::Min);
  int64_t differ = 0;
  for (size_t i = 0; i < v.size(); ++i) differ += mx.f32()[i] != mn.f32()[i];
  EXPECT_EQ(differ, 0) << what << " differs between ranks at " << differ << " positions";
}

class Conformance : public ::testing::TestWithParam<Method> {};

TEST_P(Conformance, ErrorFeedbackDensityAndRankAgreement) {
  const Method& m = GetParam();
  Communicator& c = world();
  const int P = c.size(), r = c.rank();
  SparsifierOptions opt;
  opt.density = m.density;
  opt.seed = 17;
  opt.params = m.params;
  SparsifyHook hook(make_sparsifier(m.name, opt), opt);
  const ExchangePattern pattern = hook.sparsifier().pattern();
  const std::vector<int64_t> sizes = {6000, 2500};  // two buckets: per-bucket state
  const int64_t steps = 8;
  std::vector<std::vector<double>> applied(sizes.size()), grad_sum(sizes.size());
  for (size_t b = 0; b < sizes.size(); ++b) {
    applied[b].assign(sizes[b], 0.0);
    grad_sum[b].assign(sizes[b], 0.0);
  }
  for (int64_t t = 0; t < steps; ++t) {
    for (size_t b = 0; b < sizes.size(); ++b) {
      const int64_t n = sizes[b];
      Bucket bucket;
      bucket.id = static_cast<int>(b);
      bucket.numel = n;
      Tensor g = gradient(n, r, t, static_cast<int>(b));
      for (int64_t i = 0; i < n; ++i) grad_sum[b][i] += g.f32()[i];
      Tensor before = hook.residual(bucket.id);
      std::vector<float> x = g.to_vector();
      if (before.defined())
        for (int64_t i = 0; i < n; ++i) x[i] += before.f32()[i];
      Tensor update = g.clone();
      hook.exchange(bucket, update, c, t);
      const std::vector<float> u = update.to_vector();
      const std::vector<float> after = hook.residual(bucket.id).defined()
                                           ? hook.residual(bucket.id).to_vector()
                                           : std::vector<float>(n, 0.0f);
      SCOPED_TRACE("step " + std::to_string(t) + " bucket " + std::to_string(b));
      expect_same_on_all_ranks(u, "the averaged update");
      // This rank's contribution and the dense reference built from all of them.
      std::vector<double> contrib(n);
      for (int64_t i = 0; i < n; ++i) contrib[i] = x[i] - after[i];
      const std::vector<double> total = sum_over_ranks(contrib);
      double err = 0, scale = 1e-12;
      for (int64_t i = 0; i < n; ++i) {
        err = std::max(err, std::abs(u[i] - total[i] / P));
        scale = std::max(scale, std::abs(total[i] / P));
      }
      EXPECT_LE(err, 1e-5 * scale) << "update differs from the reference sum of contributions / P";
      // Which positions this rank contributed at.
      const std::vector<SparsifyStats> stats = hook.take_stats();
      ASSERT_EQ(stats.size(), 1u);
      const SparsifyStats& s = stats[0];
      const Selection& sel = hook.last_selection(bucket.id);
      std::set<int32_t> own(sel.indices.begin(), sel.indices.end());
      EXPECT_EQ(own.size(), sel.indices.size()) << "selection has duplicates";
      if (pattern != ExchangePattern::LowRank) {
        EXPECT_EQ(s.local_count, static_cast<int64_t>(sel.indices.size()));
      }
      expect_phases_consistent(s);
      if (pattern != ExchangePattern::Dense) {
        EXPECT_GT(s.decode_ms, 0.0) << "decode not timed";
        EXPECT_GT(s.comm_ms, 0.0) << "collectives not timed";
      }
      double res_sq = 0;
      for (float v : after) res_sq += static_cast<double>(v) * v;
      EXPECT_NEAR(s.residual_norm, std::sqrt(res_sq), 1e-9 + 1e-6 * std::sqrt(res_sq));
      if (hook.sparsifier().sends_at_least_one() && pattern != ExchangePattern::Dense &&
          pattern != ExchangePattern::LeaderIndices) {
        EXPECT_GE(s.local_count, 1) << "empty selection";
      }
      if (pattern == ExchangePattern::Dense) {
        EXPECT_EQ(s.global_count, n);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(after[i], 0.0f);
      } else if (pattern == ExchangePattern::LowRank) {
        // Two dense messages, the same size on every rank, far smaller than the bucket;
        // the contribution is the decoded own message (checked above against the update).
        EXPECT_EQ(s.global_count, s.local_count);
        EXPECT_GT(s.local_count, 0);
        EXPECT_LT(s.local_count, n / 4) << "the low-rank messages do not compress";
        EXPECT_EQ(s.bytes_sent, 4 * s.local_count);
        EXPECT_TRUE(sel.indices.empty());
        expect_same_on_all_ranks({static_cast<float>(s.local_count)}, "the message size");
      } else if (pattern == ExchangePattern::AllgatherSum) {
        Sparsifier& sp = hook.sparsifier();
        SelectContext dctx;  // what decode() needs: the layout (no tensor segments here)
        dctx.bucket = bucket.id;
        const int64_t dn = sp.transform_domain() ? sp.domain_size(dctx, n) : n;
        if (sp.transform_domain()) {
          // Transform domain (FFT): the contribution is the decoded own selection.
          std::vector<float> coef(dn, 0.0f), mine(n);
          for (size_t j = 0; j < sel.indices.size(); ++j) coef[sel.indices[j]] += sel.values[j];
          bulk::CpuOps ops;
          bulk::Buffer cb, out;
          ops.upload(coef.data(), bulk::Elem::F32, dn, cb);
          sp.decode_on(ops, dctx, cb, n, out);
          ops.download(out, 0, n, mine.data());
          double tol = 0;
          for (int64_t i = 0; i < n; ++i) tol = std::max(tol, 1e-6 * std::abs(x[i]));
          for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(contrib[i], mine[i], tol) << "position " << i;
        } else {
          for (int64_t i = 0; i < n; ++i)
            if (!own.count(static_cast<int32_t>(i))) {
              ASSERT_EQ(contrib[i], 0.0) << "position " << i;
            }
        }
        // Global count = distinct positions (coefficients) selected by any rank.
        std::vector<double> hit(dn, 0.0);
        for (int32_t i : sel.indices) hit[i] = 1.0;
        const std::vector<double> hits = sum_over_ranks(hit);
        int64_t distinct = 0;
        for (double h : hits) distinct += h > 0;
        EXPECT_EQ(s.global_count, distinct);
      } else {
        const std::vector<int32_t>& res = hook.last_result_indices(bucket.id);
        std::set<int32_t> result(res.begin(), res.end());
        EXPECT_EQ(s.global_count, static_cast<int64_t>(result.size()));
        std::vector<float> rf(n, 0.0f);
        for (int32_t i : res) rf[i] = 1.0f;
        expect_same_on_all_ranks(rf, "the result positions");
        for (int64_t i = 0; i < n; ++i) {
          if (result.count(static_cast<int32_t>(i))) {
            ASSERT_EQ(after[i], 0.0f) << "transmitted position " << i << " kept a residual";
          } else {
            ASSERT_EQ(after[i], x[i]) << "untransmitted position " << i << " lost its residual";
          }
        }
        if (pattern == ExchangePattern::UnionAllreduce) {
          for (int32_t i : sel.indices) EXPECT_TRUE(result.count(i));
        }
      }
      EXPECT_DOUBLE_EQ(s.actual_density, static_cast<double>(s.global_count) / n);
      if (s.global_count > 0) {
        EXPECT_GT(s.bytes_sent, 0);
      }
      EXPECT_EQ(s.n, n);
      const double sig = hook.sparsifier().state_signature(bucket.id);
      expect_same_on_all_ranks({static_cast<float>(sig)}, "the sparsifier state");
      for (int64_t i = 0; i < n; ++i) applied[b][i] += static_cast<double>(u[i]) * P;
    }
  }
  // Error-feedback invariant over the whole run.
  for (size_t b = 0; b < sizes.size(); ++b) {
    const int64_t n = sizes[b];
    std::vector<double> res(n, 0.0);
    Tensor rt = hook.residual(static_cast<int>(b));
    if (rt.defined())
      for (int64_t i = 0; i < n; ++i) res[i] = rt.f32()[i];
    const std::vector<double> res_sum = sum_over_ranks(res), g_sum = sum_over_ranks(grad_sum[b]);
    double err = 0, scale = 1e-12;
    for (int64_t i = 0; i < n; ++i) {
      err = std::max(err, std::abs(applied[b][i] + res_sum[i] - g_sum[i]));
      scale = std::max(scale, std::abs(g_sum[i]));
    }
    EXPECT_LE(err, 1e-4 * scale) << "error feedback lost gradient mass in bucket " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Sparsifiers, Conformance, ::testing::ValuesIn(kMethods),
                         [](const ::testing::TestParamInfo<Method>& info) {
                           std::string s = info.param.name;
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
