// SIDCo threshold estimation (Abdelmoniem et al., "An Efficient Statistical-based Gradient
// Compression Technique for Distributed Training Systems", MLSys 2021, arXiv 2101.10761;
// docs/ALGORITHMS.md): fit a sparsity-inducing law to a = |x| / ||x||_2, invert its tail
// at the target density delta, and optionally refit the exceedances in further stages.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/sidco_moments.h"

namespace st::sidco {

// SIDCo-E: exponential throughout; SIDCo-P: generalized Pareto throughout; SIDCo-GP:
// gamma for the first stage, generalized Pareto for the later ones.
enum class Variant { E, P, GP };
const char* variant_name(Variant v);

// Tail thresholds: eta with P(A > eta) = delta under the law fitted by moments.
// Exponential: eta = -mean ln(delta).
double exponential_threshold(double mean, double delta);
// Generalized Pareto by the method of moments: scale = mu (mu^2/s2 + 1) / 2,
// kappa = (mu^2/s2 - 1) / 2, eta = scale (1 - delta^kappa) / kappa (kappa -> 0: exponential).
double pareto_threshold(double mean, double var, double delta);
// Gamma (Minka's closed-form shape): s = ln(mean) - mean(ln a), alpha = (3 - s +
// sqrt((s-3)^2 + 24 s)) / (12 s), beta = mean / alpha, eta = beta P^-1(alpha, 1 - delta)
// with Boost.Math's inverse regularized incomplete gamma.
double gamma_threshold(double mean, double mean_log, double delta);

// The first stage fits at delta_1 = 0.25; stage s >= 2 at (delta / delta_1)^(1/(M-1)).
constexpr double kFirstStageDelta = 0.25;
// Stage cap ceil(ln delta / ln 0.5) (at least 1): more stages than halvings make no sense.
int max_stages(double delta);
double later_stage_delta(double delta, int stages);
// The target ratio of every stage, their product delta: M = stages >= 1 gives
// [delta_1, d_s, ..., d_s] (or [delta] when M = 1 or delta >= delta_1). M = 0 is the
// fixed-ratio mode: every stage keeps delta_1 of the previous one's exceedances and the
// last takes the rest, [delta_1 x (M'-1), delta / delta_1^(M'-1)] with
// M' = ceil(ln delta / ln delta_1), so the stage count follows from delta.
std::vector<double> stage_deltas(double delta, int stages);

struct Estimate {
  double eta = 0;   // threshold on a
  float tau = 0;    // the same threshold on |x| (eta ||x||): select |x| > tau
  double norm = 0;  // ||x||_2
  int stages = 0;   // stages that ran (fewer than planned when an exceedance set gets below 2)
};

// Buffers of the multi-stage passes (per bucket, kept so they stop reallocating).
struct Workspace {
  bulk::Buffer candidates;  // I32 bucket positions of a stage's exceedances, once compacted
  bulk::Buffer values;      // F32 x at those positions, contiguous for the next passes
  bool compacted = false;
  bulk::Buffer spare_candidates, spare_values;  // the next compaction's output
};

// The multi-stage driver (stages as in stage_deltas) over a source of moments: moments(tau,
// log_scale, compact) returns the moments of |x| over the elements with |x| > tau (tau < 0: all of
// them; log_scale > 0: only sumlog = sum ln(|x| log_scale + 2.2e-16)); `compact` says that another
// pass over the same exceedances follows. The CPU and CUDA paths share it.
using MomentsFn = std::function<Moments(float tau, double log_scale, bool compact)>;
Estimate estimate_with(int64_t n, Variant variant, int stages, double delta,
                       const MomentsFn& moments);

// Multi-stage estimate on x (n = x.size()) through `ops`: one streaming pass for the
// first-stage moments (a second for the gamma stage's mean log), then one pass per later
// stage over the previous stage's exceedances (compacted into `ws` with their values once
// another pass will follow, so later passes read a contiguous quarter of the data or
// less). Deterministic for a given implementation (bulk::Ops::exceed_moments).
Estimate estimate(bulk::Ops& ops, const bulk::Buffer& x, Variant variant, int stages, double delta,
                  Workspace& ws);

// Positions with |x| > e.tau (strict, SIDCo's rule), ascending, into `out` (I32); uses
// ws.candidates when the estimate compacted them (every such position is among them).
void select_above(bulk::Ops& ops, const bulk::Buffer& x, const Estimate& e, Workspace& ws,
                  bulk::Buffer& out);

}  // namespace st::sidco
