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

// One exchange of one bucket on this rank: what went in, what came out, and the rank's
// contribution x - residual, the quantity every pattern's checks are about.
struct Exchange {
  std::string at;  // "step t bucket b: ", the prefix of every failure line
  Bucket bucket;
  int64_t n = 0;
  std::vector<float> x, update, after;  // grad + residual before; averaged update; residual
  std::vector<double> contribution;
  SparsifyStats stats;
  std::set<int32_t> own;  // this rank's selected positions
};

// The side inputs the method's registry row asks for (SparsifierInfo::side_inputs), as the
// training loop would supply them. Squared gradients: each rank's step is one sample, so
// the per-sample sum of squares is g^2.
void install_side_inputs(SparsifyHook& hook, const SparsifierInfo& row, const Tensor* grad) {
  if (!row.side_inputs.sq_grads) return;
  hook.set_aux_provider([grad](const Bucket&) {
    Tensor sq = grad->clone();
    for (int64_t i = 0; i < sq.numel(); ++i) sq.f32()[i] *= sq.f32()[i];
    return sq;
  });
}

// Runs the hook on gradient g and records what the checks need. Checks that there is one
// statistics row; without one they go on with zeros (and fail), so every rank keeps taking
// part in the same collectives.
Exchange exchange_once(Report& rep, SparsifyHook& hook, Communicator& comm, const Tensor& g,
                       int bucket_id, int64_t t) {
  Exchange e;
  e.n = g.numel();
  e.at = "step " + std::to_string(t) + " bucket " + std::to_string(bucket_id) + ": ";
  e.bucket.id = bucket_id;
  e.bucket.numel = e.n;
  Tensor before = hook.residual(bucket_id);
  e.x = g.to_vector();
  if (before.defined())
    for (int64_t i = 0; i < e.n; ++i) e.x[i] += before.f32()[i];
  Tensor update = g.clone();
  hook.exchange(e.bucket, update, comm, t);
  e.update = update.to_vector();
  const Tensor after = hook.residual(bucket_id);
  e.after = after.defined() ? after.to_vector() : std::vector<float>(e.n, 0.0f);
  e.contribution.resize(e.n);
  for (int64_t i = 0; i < e.n; ++i) e.contribution[i] = e.x[i] - e.after[i];
  const std::vector<SparsifyStats> stats = hook.take_stats();
  rep.check(stats.size() == 1u, e.at, "expected one statistics row, got ", stats.size());
  e.stats = stats.empty() ? SparsifyStats{} : stats[0];
  const Selection& sel = hook.last_selection(bucket_id);
  e.own = std::set<int32_t>(sel.indices.begin(), sel.indices.end());
  rep.check(e.own.size() == sel.indices.size(), e.at, "the selection has duplicates");
  return e;
}

// The averaged update is the same on every rank and is the dense reference: the sum of
// the ranks' contributions / P.
void check_update(Report& rep, const Exchange& e, Communicator& comm) {
  const int P = comm.size();
  const int64_t u_differ = differ_between_ranks(e.update, comm);
  rep.check(u_differ == 0, e.at, "the averaged update differs between ranks at ", u_differ,
            " positions");
  const std::vector<double> total = sum_over_ranks(e.contribution, comm);
  double err = 0, scale = 1e-12;
  for (int64_t i = 0; i < e.n; ++i) {
    err = std::max(err, std::abs(e.update[i] - total[i] / P));
    scale = std::max(scale, std::abs(total[i] / P));
  }
  rep.check(err <= 1e-5 * scale, e.at, "the update differs from the sum of contributions / P by ",
            err);
}

// Counts, timers and the logged residual norm of one exchange's statistics row.
void check_accounting(Report& rep, const Exchange& e, const Sparsifier& sp, ExchangePattern p) {
  const SparsifyStats& s = e.stats;
  if (p != ExchangePattern::LowRank)
    rep.check(s.local_count == static_cast<int64_t>(e.own.size()), e.at, "local_count ",
              s.local_count, " != selected ", e.own.size());
  check_phases(rep, e.at, s);
  if (p != ExchangePattern::Dense) {
    rep.check(s.decode_ms > 0.0, e.at, "decode not timed");
    rep.check(s.comm_ms > 0.0, e.at, "collectives not timed");
  }
  double res_sq = 0;
  for (float v : e.after) res_sq += static_cast<double>(v) * v;
  rep.check(std::abs(s.residual_norm - std::sqrt(res_sq)) <= 1e-9 + 1e-6 * std::sqrt(res_sq), e.at,
            "logged residual norm ", s.residual_norm, " != ", std::sqrt(res_sq));
  if (sp.sends_at_least_one() && p != ExchangePattern::Dense && p != ExchangePattern::LeaderIndices)
    rep.check(s.local_count >= 1, e.at, "empty selection");
}

// Dense: every position is sent and no residual is kept.
void check_dense(Report& rep, const Exchange& e) {
  rep.check(e.stats.global_count == e.n, e.at, "dense global_count ", e.stats.global_count,
            " != ", e.n);
  for (int64_t i = 0; i < e.n; ++i)
    if (!rep.check(e.after[i] == 0.0f, e.at, "dense exchange kept a residual at ", i)) break;
}

// Low rank: two dense messages, the same size on every rank, far smaller than the bucket;
// the contribution is the decoded own message (check_update compares it with the update).
void check_low_rank(Report& rep, const Exchange& e, Communicator& comm) {
  const SparsifyStats& s = e.stats;
  rep.check(s.global_count == s.local_count, e.at, "low rank: global != local count");
  rep.check(s.local_count > 0, e.at, "low rank: empty message");
  rep.check(s.local_count < e.n / 4, e.at, "the low-rank messages do not compress");
  rep.check(s.bytes_sent == 4 * s.local_count, e.at, "low rank: bytes != 4 x count");
  rep.check(e.own.empty(), e.at, "low rank: indices selected");
  rep.check(differ_between_ranks({static_cast<float>(s.local_count)}, comm) == 0, e.at,
            "the message size differs between ranks");
}

// Transform domain (FFT): the contribution is the decoded own selection.
void check_decoded_contribution(Report& rep, const Exchange& e, Sparsifier& sp,
                                const Selection& sel, const SelectContext& dctx, int64_t dn) {
  std::vector<float> coef(dn, 0.0f), mine(e.n);
  for (size_t j = 0; j < sel.indices.size(); ++j) coef[sel.indices[j]] += sel.values[j];
  bulk::CpuOps ops;
  bulk::Buffer cb, out;
  ops.upload(coef.data(), bulk::Elem::F32, dn, cb);
  sp.decode_on(ops, dctx, cb, e.n, out);
  ops.download(out, 0, e.n, mine.data());
  double tol = 0;
  for (int64_t i = 0; i < e.n; ++i) tol = std::max(tol, 1e-6 * std::abs(e.x[i]));
  for (int64_t i = 0; i < e.n; ++i)
    if (!rep.check(std::abs(e.contribution[i] - mine[i]) <= tol, e.at, "contribution at ", i,
                   " is not the decoded own selection"))
      break;
}

// Allgather-sum: a rank contributes only at its own selection (or its decoded selection),
// and the global count is the number of distinct positions any rank selected.
void check_allgather_sum(Report& rep, const Exchange& e, SparsifyHook& hook, Communicator& comm) {
  Sparsifier& sp = hook.sparsifier();
  const Selection& sel = hook.last_selection(e.bucket.id);
  SelectContext dctx;  // what decode() needs: the layout (no tensor segments here)
  dctx.bucket = e.bucket.id;
  const int64_t dn = sp.transform_domain() ? sp.domain_size(dctx, e.n) : e.n;
  if (sp.transform_domain()) {
    check_decoded_contribution(rep, e, sp, sel, dctx, dn);
  } else {
    for (int64_t i = 0; i < e.n; ++i)
      if (!e.own.count(static_cast<int32_t>(i)) &&
          !rep.check(e.contribution[i] == 0.0, e.at, "contribution at unselected position ", i))
        break;
  }
  std::vector<double> hit(dn, 0.0);
  for (int32_t i : sel.indices) hit[i] = 1.0;
  const std::vector<double> hits = sum_over_ranks(hit, comm);
  int64_t distinct = 0;
  for (double h : hits) distinct += h > 0;
  rep.check(e.stats.global_count == distinct, e.at, "global_count ", e.stats.global_count,
            " != distinct positions ", distinct);
}

// Union-allreduce, shared and leader indices: one result set on every rank; a position in
// it is sent whole (no residual), any other keeps all of x; union-allreduce's result holds
// every rank's own selection.
void check_result_positions(Report& rep, const Exchange& e, SparsifyHook& hook, Communicator& comm,
                            ExchangePattern p) {
  const std::vector<int32_t>& res = hook.last_result_indices(e.bucket.id);
  const std::set<int32_t> result(res.begin(), res.end());
  rep.check(e.stats.global_count == static_cast<int64_t>(result.size()), e.at, "global_count ",
            e.stats.global_count, " != result positions ", result.size());
  std::vector<float> rf(e.n, 0.0f);
  for (int32_t i : res) rf[i] = 1.0f;
  rep.check(differ_between_ranks(rf, comm) == 0, e.at, "the result positions differ between ranks");
  for (int64_t i = 0; i < e.n; ++i) {
    const bool sent = result.count(static_cast<int32_t>(i)) > 0;
    if (!rep.check(sent ? e.after[i] == 0.0f : e.after[i] == e.x[i], e.at,
                   sent ? "transmitted position " : "untransmitted position ", i,
                   sent ? " kept a residual" : " lost its residual"))
      break;
  }
  if (p == ExchangePattern::UnionAllreduce)
    for (int32_t i : e.own)
      if (!rep.check(result.count(i) > 0, e.at, "own selection ", i, " not in the result")) break;
}

// Every property of one exchange, in the same order (and so the same collectives) on
// every rank.
void check_exchange(Report& rep, const Exchange& e, SparsifyHook& hook, Communicator& comm) {
  const ExchangePattern p = hook.sparsifier().pattern();
  check_update(rep, e, comm);
  check_accounting(rep, e, hook.sparsifier(), p);
  if (p == ExchangePattern::Dense)
    check_dense(rep, e);
  else if (p == ExchangePattern::LowRank)
    check_low_rank(rep, e, comm);
  else if (p == ExchangePattern::AllgatherSum)
    check_allgather_sum(rep, e, hook, comm);
  else
    check_result_positions(rep, e, hook, comm, p);
  const SparsifyStats& s = e.stats;
  // Out of the positions counted: n, or a transform method's coefficient domain.
  const int64_t domain = s.domain > 0 ? s.domain : e.n;
  rep.check(
      s.actual_density == static_cast<double>(s.global_count) / domain && s.actual_density <= 1.0,
      e.at, "actual_density is not global_count / domain in [0, 1]");
  if (s.global_count > 0) rep.check(s.bytes_sent > 0, e.at, "no bytes accounted");
  rep.check(s.n == e.n, e.at, "stats n ", s.n, " != ", e.n);
  const double sig = hook.sparsifier().state_signature(e.bucket.id);
  rep.check(differ_between_ranks({static_cast<float>(sig)}, comm) == 0, e.at,
            "the sparsifier state differs between ranks");
}

// Error feedback loses nothing over the run: sum_t P*update_t + sum_r residual_r equals
// the sum over steps and ranks of the gradients.
void check_error_feedback(Report& rep, SparsifyHook& hook, Communicator& comm, int bucket_id,
                          const std::vector<double>& applied, const std::vector<double>& grads) {
  const int64_t n = static_cast<int64_t>(applied.size());
  std::vector<double> res(n, 0.0);
  Tensor rt = hook.residual(bucket_id);
  if (rt.defined())
    for (int64_t i = 0; i < n; ++i) res[i] = rt.f32()[i];
  const std::vector<double> res_sum = sum_over_ranks(res, comm);
  const std::vector<double> g_sum = sum_over_ranks(grads, comm);
  double err = 0, scale = 1e-12;
  for (int64_t i = 0; i < n; ++i) {
    err = std::max(err, std::abs(applied[i] + res_sum[i] - g_sum[i]));
    scale = std::max(scale, std::abs(g_sum[i]));
  }
  rep.check(err <= 1e-4 * scale, "error feedback lost gradient mass in bucket ", bucket_id, " (",
            err, ")");
}

}  // namespace

Report check_conformance(const Case& c, Communicator& comm) {
  Report rep;
  rep.method = c.method;
  const SparsifierInfo& row = sparsifier_info(c.method);
  SparsifierOptions opt;
  opt.density = c.density;
  opt.seed = c.seed;
  opt.params = c.params;
  SparsifyHook hook(row.build(opt), opt);
  Tensor grad;  // this step's gradient of the bucket being exchanged (the side inputs')
  install_side_inputs(hook, row, &grad);
  const std::vector<int64_t>& sizes = c.bucket_sizes;
  std::vector<std::vector<double>> applied(sizes.size()), grad_sum(sizes.size());
  for (size_t b = 0; b < sizes.size(); ++b) {
    applied[b].assign(sizes[b], 0.0);
    grad_sum[b].assign(sizes[b], 0.0);
  }
  for (int64_t t = 0; t < c.steps; ++t) {
    for (size_t b = 0; b < sizes.size(); ++b) {
      const int bucket_id = static_cast<int>(b);
      grad = heavy_tailed_gradient(sizes[b], comm.rank(), t, bucket_id);
      for (int64_t i = 0; i < sizes[b]; ++i) grad_sum[b][i] += grad.f32()[i];
      const Exchange e = exchange_once(rep, hook, comm, grad, bucket_id, t);
      check_exchange(rep, e, hook, comm);
      for (int64_t i = 0; i < e.n; ++i)
        applied[b][i] += static_cast<double>(e.update[i]) * comm.size();
    }
  }
  for (size_t b = 0; b < sizes.size(); ++b)
    check_error_feedback(rep, hook, comm, static_cast<int>(b), applied[b], grad_sum[b]);
  return rep;
}

}  // namespace st::conformance
