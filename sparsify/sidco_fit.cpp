#include "sparsify/sidco_fit.h"

#include <algorithm>
#include <boost/math/special_functions/gamma.hpp>
#include <cmath>

#include "core/error.h"

namespace st::sidco {

namespace {

// The law fitted at one stage: first stage on all a, later stages on the exceedances
// shifted by their minimum (so `m` describes the shifted sample).
double fit(Variant v, bool first, double mean, double var, double mean_log, double delta) {
  if (v == Variant::E) return exponential_threshold(mean, delta);
  if (v == Variant::GP && first) return gamma_threshold(mean, mean_log, delta);
  return pareto_threshold(mean, var, delta);
}

}  // namespace

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::E:
      return "E";
    case Variant::P:
      return "P";
    case Variant::GP:
      return "GP";
  }
  return "?";
}

double exponential_threshold(double mean, double delta) {
  return -mean * std::log(delta);
}

double pareto_threshold(double mean, double var, double delta) {
  if (!(var > 0)) return exponential_threshold(mean, delta);
  const double r = mean * mean / var;
  const double scale = mean * (r + 1.0) / 2.0, kappa = (r - 1.0) / 2.0;
  if (std::abs(kappa) < 1e-9) return -scale * std::log(delta);
  return scale * (1.0 - std::pow(delta, kappa)) / kappa;
}

double gamma_threshold(double mean, double mean_log, double delta) {
  const double s = std::log(mean) - mean_log;  // >= 0 by Jensen; 0 only for a constant
  if (!(s > 1e-12)) return mean;
  const double alpha = (3.0 - s + std::sqrt((s - 3.0) * (s - 3.0) + 24.0 * s)) / (12.0 * s);
  const double beta = mean / alpha;
  return beta * boost::math::gamma_p_inv(alpha, 1.0 - delta);
}

void Moments::add(const Moments& o) {
  count += o.count;
  sum += o.sum;
  sumsq += o.sumsq;
  sumlog += o.sumlog;
  min = std::min(min, o.min);
}

double Moments::var() const {
  if (count < 2) return 0.0;
  const double c = static_cast<double>(count), mu = sum / c;
  return std::max(0.0, (sumsq - c * mu * mu) / (c - 1.0));
}

int max_stages(double delta) {
  return std::max(1, static_cast<int>(std::ceil(std::log(delta) / std::log(0.5))));
}

double later_stage_delta(double delta, int stages) {
  return std::pow(delta / kFirstStageDelta, 1.0 / static_cast<double>(stages - 1));
}

std::vector<double> stage_deltas(double delta, int stages) {
  if (delta >= kFirstStageDelta || stages == 1) return {delta};
  if (stages >= 2) {
    std::vector<double> d(stages, later_stage_delta(delta, stages));
    d[0] = kFirstStageDelta;
    return d;
  }
  // Fixed ratio per stage; the tolerance keeps delta = delta_1^j at j stages.
  const int m = static_cast<int>(std::ceil(std::log(delta) / std::log(kFirstStageDelta) - 1e-9));
  if (m <= 1) return {delta};
  std::vector<double> d(m, kFirstStageDelta);
  d[m - 1] = delta / std::pow(kFirstStageDelta, m - 1);
  return d;
}

Estimate estimate_with(int64_t n, Variant variant, int stages, double delta,
                       const MomentsFn& moments) {
  ST_CHECK(delta > 0 && delta < 1, "SIDCo: density must be in (0, 1), got ", delta);
  ST_CHECK(stages >= 0, "SIDCo: stages must be >= 0, got ", stages);
  Estimate e;
  if (n <= 0) return e;
  // Stage 1 moments of |x| (sum a^2 = 1 by construction, so the norm comes for free).
  const Moments m0 = moments(-1.0f, 0.0, false);
  e.norm = std::sqrt(m0.sumsq);
  if (!(e.norm > 0) || !std::isfinite(e.norm)) {
    e.tau = std::numeric_limits<float>::infinity();  // nothing to send (all zero) or NaN
    e.eta = std::numeric_limits<double>::infinity();
    return e;
  }
  const double inv = 1.0 / e.norm, c0 = static_cast<double>(n);
  const double mean0 = m0.sum * inv / c0;
  const double var0 = n > 1 ? std::max(0.0, (1.0 - c0 * mean0 * mean0) / (c0 - 1.0)) : 0.0;
  const double mean_log0 = variant == Variant::GP ? moments(-1.0f, inv, false).sumlog / c0 : 0.0;
  const std::vector<double> ds = stage_deltas(delta, stages);
  e.eta = fit(variant, true, mean0, var0, mean_log0, ds[0]);
  e.tau = static_cast<float>(e.eta * e.norm);
  e.stages = 1;
  const int planned = static_cast<int>(ds.size());
  for (int s = 2; s <= planned; ++s) {
    // Exceedances of the previous threshold (strict, as the selection), in |x| units.
    const float tau = e.tau;
    const Moments m = moments(tau, 0.0, s < planned);
    if (m.count < 2) break;  // too few exceedances to fit: keep the previous threshold
    // Shifted exceedances b = a - t_min: mean shifts, the variance does not.
    const double t_min = m.min * inv;
    const double mean = m.mean() * inv - t_min, var = m.var() * inv * inv;
    e.eta = t_min + fit(variant, false, mean, var, 0.0, ds[s - 1]);
    e.tau = std::max(tau, static_cast<float>(e.eta * e.norm));
    e.stages = s;
  }
  return e;
}

Estimate estimate(bulk::Ops& ops, const bulk::Buffer& x, Variant variant, int stages, double delta,
                  Workspace& ws) {
  bulk::ThresholdOps& thresholds = bulk::need<bulk::ThresholdOps>(ops, "sidco");
  ws.compacted = false;
  const int64_t n = x.size();
  // One pass: all of x (tau < 0) or the exceedances of tau over the current set, which is
  // x or, once compacted, the contiguous `values` of the candidates; with `compact`, the
  // exceedances become the new candidate set. The first exceedance pass keeps ~delta_1 =
  // 25% of x, too dense for compaction to pay; later ones keep 25% * delta_s or less and
  // compact when another pass follows.
  int exceed_passes = 0;
  auto pass = [&](float tau, double log_scale, bool more) -> Moments {
    if (tau < 0) return thresholds.exceed_moments(x, {0, n}, tau, log_scale);
    ++exceed_passes;
    const bulk::Buffer& v = ws.compacted ? ws.values : x;
    const part::Range all{0, v.size()};
    if (!(more && exceed_passes >= 2)) return thresholds.exceed_moments(v, all, tau, 0.0);
    const Moments m = thresholds.exceed_compact(
        v, all, tau, ws.compacted ? &ws.candidates : nullptr, ws.spare_candidates, ws.spare_values);
    std::swap(ws.candidates, ws.spare_candidates);
    std::swap(ws.values, ws.spare_values);
    ws.compacted = true;
    return m;
  };
  return estimate_with(n, variant, stages, delta, pass);
}

void select_above(bulk::Ops& ops, const bulk::Buffer& x, const Estimate& e, Workspace& ws,
                  bulk::Buffer& out) {
  bulk::ThresholdOps& thresholds = bulk::need<bulk::ThresholdOps>(ops, "sidco");
  if (!(e.tau < std::numeric_limits<float>::infinity())) {
    ops.resize(out, bulk::Elem::I32, 0);
  } else if (!ws.compacted) {  // one streaming pass
    ops.select_abs(x, {0, x.size()}, e.tau, /*strict=*/true, out);
  } else {  // the compacted candidates hold every exceedance of the last stage
    thresholds.exceed_compact(ws.values, {0, ws.values.size()}, e.tau, &ws.candidates, out,
                              ws.spare_values);
  }
}

}  // namespace st::sidco
