#include "sparsify/testing/conformance.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/rng.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"

namespace st::conformance {

std::string Report::summary() const {
  std::ostringstream s;
  if (passed()) {
    s << method << ": " << checks << " checks passed";
    return s.str();
  }
  s << method << ": " << failed << " of " << checks << " checks failed";
  for (const std::string& f : failures) s << "\n  " << f;
  if (static_cast<size_t>(failed) > failures.size())
    s << "\n  ... " << failed - static_cast<int64_t>(failures.size()) << " more";
  return s.str();
}

Tensor heavy_tailed_gradient(int64_t n, int rank, int64_t step, int bucket) {
  Rng rng(1000003ull * rank + 7919ull * step + bucket);
  Tensor g = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) g.f32()[i] = rng.normal() * std::abs(rng.normal()) * 0.01f;
  return g;
}

namespace {

std::vector<double> sum_over_ranks(const std::vector<double>& v, Communicator& c) {
  // Gathered as floats and summed in double (allreduce_scalar per element would be slow).
  const int64_t n = static_cast<int64_t>(v.size());
  Tensor mine = Tensor::empty({n}), all = Tensor::empty({n * c.size()});
  for (int64_t i = 0; i < n; ++i) mine.f32()[i] = static_cast<float>(v[i]);
  c.allgather(mine, all);
  std::vector<double> out(n, 0.0);
  for (int r = 0; r < c.size(); ++r)
    for (int64_t i = 0; i < n; ++i) out[i] += all.f32()[r * n + i];
  return out;
}

// How many positions of v differ between ranks (0 when all agree).
int64_t differ_between_ranks(const std::vector<float>& v, Communicator& c) {
  Tensor mx = Tensor::from_vector(v, {static_cast<int64_t>(v.size())}), mn = mx.clone();
  c.allreduce(mx, ReduceOp::Max);
  c.allreduce(mn, ReduceOp::Min);
  int64_t differ = 0;
  for (size_t i = 0; i < v.size(); ++i) differ += mx.f32()[i] != mn.f32()[i];
  return differ;
}

// The phases of one exchange (sparsify_hook.h): non-negative, disjoint, inside their total.
void check_phases(Report& r, const std::string& at, const SparsifyStats& s) {
  for (double ms : {s.ef_ms, s.select_ms, s.partition_ms, s.estimate_ms, s.pack_ms, s.comm_ms,
                    s.decode_ms, s.update_ms, s.exchange_ms, s.total_ms})
    r.check(ms >= 0.0, at, "a phase time is negative: ", ms, " ms");
  const double slack = 1e-6;  // rounding of the millisecond sums
  r.check(s.pack_ms + s.comm_ms + s.decode_ms + s.update_ms <= s.exchange_ms + slack, at, "pack ",
          s.pack_ms, " + comm ", s.comm_ms, " + decode ", s.decode_ms, " + update ", s.update_ms,
          " exceed the exchange ", s.exchange_ms);
  r.check(s.ef_ms + s.select_ms + s.exchange_ms <= s.total_ms + slack, at,
          "error feedback + selection + exchange exceed the total");
  r.check(s.partition_ms + s.estimate_ms <= s.select_ms + slack, at,
          "partition + estimate exceed the selection time");
}

}  // namespace

Report check_conformance(const Case& c, Communicator& comm) {
  Report rep;
  rep.method = c.method;
  const int P = comm.size(), rank = comm.rank();
  SparsifierOptions opt;
  opt.density = c.density;
  opt.seed = c.seed;
  opt.params = c.params;
  SparsifyHook hook(make_sparsifier(c.method, opt), opt);
  const ExchangePattern pattern = hook.sparsifier().pattern();
  const std::vector<int64_t>& sizes = c.bucket_sizes;
  std::vector<std::vector<double>> applied(sizes.size()), grad_sum(sizes.size());
  for (size_t b = 0; b < sizes.size(); ++b) {
    applied[b].assign(sizes[b], 0.0);
    grad_sum[b].assign(sizes[b], 0.0);
  }
  for (int64_t t = 0; t < c.steps; ++t) {
    for (size_t b = 0; b < sizes.size(); ++b) {
      const int64_t n = sizes[b];
      const std::string at = "step " + std::to_string(t) + " bucket " + std::to_string(b) + ": ";
      Bucket bucket;
      bucket.id = static_cast<int>(b);
      bucket.numel = n;
      Tensor g = heavy_tailed_gradient(n, rank, t, static_cast<int>(b));
      for (int64_t i = 0; i < n; ++i) grad_sum[b][i] += g.f32()[i];
      Tensor before = hook.residual(bucket.id);
      std::vector<float> x = g.to_vector();
      if (before.defined())
        for (int64_t i = 0; i < n; ++i) x[i] += before.f32()[i];
      Tensor update = g.clone();
      hook.exchange(bucket, update, comm, t);
      const std::vector<float> u = update.to_vector();
      const std::vector<float> after = hook.residual(bucket.id).defined()
                                           ? hook.residual(bucket.id).to_vector()
                                           : std::vector<float>(n, 0.0f);
      const int64_t u_differ = differ_between_ranks(u, comm);
      rep.check(u_differ == 0, at, "the averaged update differs between ranks at ", u_differ,
                " positions");
      // This rank's contribution and the dense reference built from all of them.
      std::vector<double> contrib(n);
      for (int64_t i = 0; i < n; ++i) contrib[i] = x[i] - after[i];
      const std::vector<double> total = sum_over_ranks(contrib, comm);
      double err = 0, scale = 1e-12;
      for (int64_t i = 0; i < n; ++i) {
        err = std::max(err, std::abs(u[i] - total[i] / P));
        scale = std::max(scale, std::abs(total[i] / P));
      }
      rep.check(err <= 1e-5 * scale, at, "the update differs from the sum of contributions / P by ",
                err);
      const std::vector<SparsifyStats> stats = hook.take_stats();
      rep.check(stats.size() == 1u, at, "expected one statistics row, got ", stats.size());
      // Without a row the checks go on with zeros (and fail), so every rank keeps
      // taking part in the same collectives.
      const SparsifyStats s = stats.empty() ? SparsifyStats{} : stats[0];
      const Selection& sel = hook.last_selection(bucket.id);
      std::set<int32_t> own(sel.indices.begin(), sel.indices.end());
      rep.check(own.size() == sel.indices.size(), at, "the selection has duplicates");
      if (pattern != ExchangePattern::LowRank)
        rep.check(s.local_count == static_cast<int64_t>(sel.indices.size()), at, "local_count ",
                  s.local_count, " != selected ", sel.indices.size());
      check_phases(rep, at, s);
      if (pattern != ExchangePattern::Dense) {
        rep.check(s.decode_ms > 0.0, at, "decode not timed");
        rep.check(s.comm_ms > 0.0, at, "collectives not timed");
      }
      double res_sq = 0;
      for (float v : after) res_sq += static_cast<double>(v) * v;
      rep.check(std::abs(s.residual_norm - std::sqrt(res_sq)) <= 1e-9 + 1e-6 * std::sqrt(res_sq),
                at, "logged residual norm ", s.residual_norm, " != ", std::sqrt(res_sq));
      if (hook.sparsifier().sends_at_least_one() && pattern != ExchangePattern::Dense &&
          pattern != ExchangePattern::LeaderIndices)
        rep.check(s.local_count >= 1, at, "empty selection");
      if (pattern == ExchangePattern::Dense) {
        rep.check(s.global_count == n, at, "dense global_count ", s.global_count, " != ", n);
        for (int64_t i = 0; i < n; ++i)
          if (!rep.check(after[i] == 0.0f, at, "dense exchange kept a residual at ", i)) break;
      } else if (pattern == ExchangePattern::LowRank) {
        // Two dense messages, the same size on every rank, far smaller than the bucket;
        // the contribution is the decoded own message (checked above against the update).
        rep.check(s.global_count == s.local_count, at, "low rank: global != local count");
        rep.check(s.local_count > 0, at, "low rank: empty message");
        rep.check(s.local_count < n / 4, at, "the low-rank messages do not compress");
        rep.check(s.bytes_sent == 4 * s.local_count, at, "low rank: bytes != 4 x count");
        rep.check(sel.indices.empty(), at, "low rank: indices selected");
        rep.check(differ_between_ranks({static_cast<float>(s.local_count)}, comm) == 0, at,
                  "the message size differs between ranks");
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
          for (int64_t i = 0; i < n; ++i)
            if (!rep.check(std::abs(contrib[i] - mine[i]) <= tol, at, "contribution at ", i,
                           " is not the decoded own selection"))
              break;
        } else {
          for (int64_t i = 0; i < n; ++i)
            if (!own.count(static_cast<int32_t>(i)) &&
                !rep.check(contrib[i] == 0.0, at, "contribution at unselected position ", i))
              break;
        }
        // Global count = distinct positions (coefficients) selected by any rank.
        std::vector<double> hit(dn, 0.0);
        for (int32_t i : sel.indices) hit[i] = 1.0;
        const std::vector<double> hits = sum_over_ranks(hit, comm);
        int64_t distinct = 0;
        for (double h : hits) distinct += h > 0;
        rep.check(s.global_count == distinct, at, "global_count ", s.global_count,
                  " != distinct positions ", distinct);
      } else {
        const std::vector<int32_t>& res = hook.last_result_indices(bucket.id);
        std::set<int32_t> result(res.begin(), res.end());
        rep.check(s.global_count == static_cast<int64_t>(result.size()), at, "global_count ",
                  s.global_count, " != result positions ", result.size());
        std::vector<float> rf(n, 0.0f);
        for (int32_t i : res) rf[i] = 1.0f;
        rep.check(differ_between_ranks(rf, comm) == 0, at,
                  "the result positions differ between ranks");
        for (int64_t i = 0; i < n; ++i) {
          const bool sent = result.count(static_cast<int32_t>(i)) > 0;
          if (!rep.check(sent ? after[i] == 0.0f : after[i] == x[i], at,
                         sent ? "transmitted position " : "untransmitted position ", i,
                         sent ? " kept a residual" : " lost its residual"))
            break;
        }
        if (pattern == ExchangePattern::UnionAllreduce)
          for (int32_t i : sel.indices)
            if (!rep.check(result.count(i) > 0, at, "own selection ", i, " not in the result"))
              break;
      }
      rep.check(s.actual_density == static_cast<double>(s.global_count) / n, at,
                "actual_density is not global_count / n");
      if (s.global_count > 0) rep.check(s.bytes_sent > 0, at, "no bytes accounted");
      rep.check(s.n == n, at, "stats n ", s.n, " != ", n);
      const double sig = hook.sparsifier().state_signature(bucket.id);
      rep.check(differ_between_ranks({static_cast<float>(sig)}, comm) == 0, at,
                "the sparsifier state differs between ranks");
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
    const std::vector<double> res_sum = sum_over_ranks(res, comm);
    const std::vector<double> g_sum = sum_over_ranks(grad_sum[b], comm);
    double err = 0, scale = 1e-12;
    for (int64_t i = 0; i < n; ++i) {
      err = std::max(err, std::abs(applied[b][i] + res_sum[i] - g_sum[i]));
      scale = std::max(scale, std::abs(g_sum[i]));
    }
    rep.check(err <= 1e-4 * scale, "error feedback lost gradient mass in bucket ", b, " (", err,
              ")");
  }
  return rep;
}

}  // namespace st::conformance
