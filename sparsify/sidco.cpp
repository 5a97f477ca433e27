#include "sparsify/sidco.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace st {

namespace {
// The --sp keys, spelled once: keys() declares them, from() reads them.
constexpr char kStages[] = "stages", kAdapt[] = "adapt", kEvery[] = "every", kBand[] = "band";
}  // namespace

std::vector<SpKey> Sidco::keys() {
  const Options o;
  SpKey adapt = whole(kAdapt, o.adapt, "[-1, 1]",
                      "stage-count adaptation: 1 raises M on over-selection, -1 the reverse, "
                      "0 fixed, auto turns round per bucket");
  adapt.words = {{"auto", kAuto}};
  return {
      whole(kStages, o.stages, "[0, inf)",
            "initial number of stages M (0: every stage keeps 0.25, M follows from d)"),
      adapt,
      whole(kEvery, o.every, "[1, inf)", "exchanges of a bucket between adaptations"),
      real(kBand, o.band, "(0, 1)", "tolerated deviation of achieved / target"),
  };
}

Sidco::Options Sidco::from(const SpValues& v, sidco::Variant variant) {
  Options r;
  r.variant = variant;
  r.stages = static_cast<int>(v.get_int(kStages));
  r.adapt = static_cast<int>(v.get_int(kAdapt));  // "auto" reads as kAuto
  r.every = static_cast<int>(v.get_int(kEvery));
  r.band = v.get(kBand);
  return r;
}

Sidco::Options Sidco::from(const SparsifierOptions& o, sidco::Variant variant) {
  return from(SpValues(method_name(variant), keys(), o.params), variant);
}

std::string Sidco::method_name(sidco::Variant variant) {
  switch (variant) {
    case sidco::Variant::E:
      return "sidco-e";
    case sidco::Variant::P:
      return "sidco-p";
    case sidco::Variant::GP:
      return "sidco-gp";
  }
  return "sidco";
}

Sidco::Sidco(Options o) : opt_(o) {}

std::string Sidco::name() const {
  return method_name(opt_.variant);
}

Sidco::State& Sidco::state(int bucket, double delta) {
  auto [it, fresh] = state_.try_emplace(bucket);
  State& s = it->second;
  s.max_m = sidco::max_stages(delta);
  if (fresh) s.m = std::min(opt_.stages, s.max_m);
  return s;
}

void Sidco::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                      DeviceSelection& out) {
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);
  State& s = state(ctx.bucket, ctx.density);
  if (ctx.density >= 1.0) {  // nothing to compress
    ops.iota(out.indices, x.size(), 0);
    return;
  }
  const sidco::Estimate e = sidco::estimate(ops, x, opt_.variant, s.m, ctx.density, s.ws);
  sidco::select_above(ops, x, e, s.ws, out.indices);
  out.threshold = e.tau;
}

int Sidco::adapt_stages(int m, double ratio, int direction, double band, int max_m) {
  if (direction == 0) return m;
  // More stages lower the threshold's over-selection on heavy tails (docs/ALGORITHMS.md table).
  int step = 0;
  if (ratio > 1.0 + band) step = 1;
  if (ratio < 1.0 - band) step = -1;
  return std::clamp(m + direction * step, 1, max_m);
}

void Sidco::observe(const ExchangeFeedback& fb) {
  auto it = state_.find(fb.bucket);
  if (it == state_.end() || fb.k <= 0 || fb.rank_counts.empty()) return;
  State& s = it->second;
  if (s.m == 0) return;  // fixed-ratio mode: the stage count follows from delta
  double mean = 0;
  for (int64_t c : fb.rank_counts) mean += static_cast<double>(c);
  mean /= static_cast<double>(fb.rank_counts.size());
  s.ratio_sum += mean / static_cast<double>(fb.k);
  if (++s.seen < opt_.every) return;
  const double ratio = s.ratio_sum / s.seen;
  s.ratio_sum = 0;
  s.seen = 0;
  if (opt_.adapt != kAuto) {
    s.m = adapt_stages(s.m, ratio, opt_.adapt, opt_.band, s.max_m);
    return;
  }
  // auto: turn round when the last move made things worse, or when a bound blocks it.
  const double error = std::abs(std::log(std::max(ratio, 1e-9)));
  if (s.moved && error > s.last_error) s.direction = -s.direction;
  int m = adapt_stages(s.m, ratio, s.direction, opt_.band, s.max_m);
  if (m == s.m && std::abs(ratio - 1.0) > opt_.band) {
    s.direction = -s.direction;
    m = adapt_stages(s.m, ratio, s.direction, opt_.band, s.max_m);
  }
  s.moved = m != s.m;
  s.last_error = error;
  s.m = m;
}

double Sidco::state_signature(int bucket) const {
  auto it = state_.find(bucket);
  return it == state_.end() ? 0.0 : it->second.m + 0.001 * it->second.seen;
}

int Sidco::stages(int bucket) const {
  auto it = state_.find(bucket);
  return it == state_.end() ? opt_.stages : it->second.m;
}

void Sidco::save_state(StateWriter& out) const {
  out.put_buckets(state_, [](StateWriter& w, const State& s) {
    w.put<int32_t>(s.m);
    w.put(s.ratio_sum);
    w.put<int32_t>(s.seen);
    w.put<int32_t>(s.max_m);
    w.put<int32_t>(s.direction);
    w.put<int32_t>(s.moved ? 1 : 0);
    w.put(s.last_error);
  });
}

void Sidco::load_state(StateReader& in) {
  in.get_buckets(state_, [](StateReader& r, State& s) {
    s.m = r.get<int32_t>();
    s.ratio_sum = r.get<double>();
    s.seen = r.get<int32_t>();
    s.max_m = r.get<int32_t>();
    s.direction = r.get<int32_t>();
    s.moved = r.get<int32_t>() != 0;
    s.last_error = r.get<double>();
  });
  // max_stages() is below 1100 for any positive double density, and m never exceeds it;
  // seen counts a window, so anything else is a damaged or foreign stream.
  for (const auto& [id, s] : state_)
    ST_CHECK(s.m >= 1 && s.m <= s.max_m && s.max_m <= 1100 && s.seen >= 0 && s.seen <= opt_.every &&
                 s.direction >= -1 && s.direction <= 1 && std::isfinite(s.ratio_sum) &&
                 std::isfinite(s.last_error),
             in.what(), ": ", name(), " bucket ", id, " has stages ", s.m, " of ", s.max_m,
             ", window ", s.seen, ", direction ", s.direction, " (corrupt sparsifier state)");
}

}  // namespace st
