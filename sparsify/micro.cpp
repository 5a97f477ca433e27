#include "sparsify/micro.h"

#include <cmath>
#include <cstddef>

#include "core/error.h"

namespace st {

namespace {
// The --sp keys, spelled once: keys() declares them, rule_from() reads them.
constexpr char kHi[] = "hi", kLo[] = "lo", kUp[] = "up", kMid[] = "mid", kDown[] = "down";
}  // namespace

Micro::Micro(const part::ThresholdRule& rule) : rule_(rule) {}

std::vector<SpKey> Micro::keys() {
  const part::ThresholdRule rule;  // MiCRO's defaults
  return {
      real(kHi, rule.hi, "(0, inf)", "upper edge of the density band (ratio k_prev / k)"),
      real(kLo, rule.lo, "(0, inf)", "lower edge of the band (lo <= hi)"),
      real(kUp, rule.up, "(0, inf)", "tau factor above the band"),
      real(kMid, rule.mid, "(0, inf)", "tau factor inside the band"),
      real(kDown, rule.down, "(0, inf)", "tau factor below the band"),
  };
}

part::ThresholdRule Micro::rule_from(const SpValues& v) {
  part::ThresholdRule r;
  r.hi = v.get(kHi);
  r.lo = v.get(kLo);
  r.up = v.get(kUp);
  r.mid = v.get(kMid);
  r.down = v.get(kDown);
  ST_CHECK(r.lo <= r.hi, "--sp lo=", r.lo, " hi=", r.hi, ": the density band needs lo <= hi");
  return r;
}

const Micro::BucketRule& Micro::bucket_rule(int bucket) const {
  auto it = buckets_.find(bucket);
  ST_CHECK(it != buckets_.end(), name(), ": bucket ", bucket, " has not been selected on yet");
  return it->second;
}

double Micro::threshold(int bucket) const {
  auto it = buckets_.find(bucket);
  return it == buckets_.end() ? 0.0 : it->second.tau;
}

double Micro::state_signature(int bucket) const {
  return threshold(bucket);
}

part::Range Micro::partition(int bucket, int p) const {
  const BucketRule& b = bucket_rule(bucket);
  return part::equal_partition(b.n, b.world, p);
}

void Micro::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                      DeviceSelection& out) {
  bulk::ThresholdOps& thresholds = bulk::need<bulk::ThresholdOps>(ops, name());
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);
  const int64_t n = x.size();
  auto [it, fresh] = buckets_.try_emplace(ctx.bucket);
  BucketRule& b = it->second;
  if (fresh) {
    b.n = n;
    b.world = ctx.world;
    b.tau = part::initial_threshold(ctx.k);  // tau_0 = 1/(2 sqrt(k))
    start_bucket(ctx.bucket, n, ctx.world);
  }
  ST_CHECK(b.n == n && b.world == ctx.world, name(), ": bucket ", ctx.bucket, " changed from ", b.n,
           " elements on ", b.world, " ranks to ", n, " on ", ctx.world);
  // Rank r owns partition (t + r) mod P; one comparison pass over it. If nothing
  // passes, one element, a different one each iteration (MiCRO code).
  const part::Range own =
      partition(ctx.bucket, part::owned_partition(ctx.iteration, ctx.rank, ctx.world));
  thresholds.threshold_select(x, own, static_cast<float>(b.tau), ctx.iteration, out.indices);
  out.threshold = b.tau;
}

void Micro::observe(const ExchangeFeedback& fb) {
  auto it = buckets_.find(fb.bucket);
  if (it == buckets_.end()) return;
  // k_prev = the global transmitted count, the same on every rank.
  it->second.tau = part::next_threshold(rule_, it->second.tau, fb.global_count, fb.k);
  adapt(fb);
}

void Micro::save_state(StateWriter& out) const {
  // Field by field, with the padding of BucketRule's layout written as zeros: copying the
  // struct would copy uninitialised padding, and every rank's state must be byte-equal
  // for a resume on another number of ranks to carry one copy (sparsify/resplit.h).
  static_assert(sizeof(BucketRule) == 24 && offsetof(BucketRule, tau) == 16);
  out.put_buckets(buckets_, [](StateWriter& w, const BucketRule& b) {
    w.put<int64_t>(b.n);
    w.put<int32_t>(b.world);
    w.put<int32_t>(0);
    w.put<double>(b.tau);
  });
}

void Micro::load_state(StateReader& in) {
  in.get_buckets(buckets_, [](StateReader& r, BucketRule& b) { b = r.get<BucketRule>(); });
  for (const auto& [id, b] : buckets_)
    ST_CHECK(b.n >= 0 && b.world >= 1 && std::isfinite(b.tau) && b.tau >= 0, in.what(), ": ",
             name(), " bucket ", id, " has n=", b.n, " world=", b.world, " tau=", b.tau,
             " (corrupt sparsifier state)");
  // On another number of ranks the threshold carries over (it is the same on every rank
  // and tracks the global count), and the partitions, a function of (n, world), follow
  // the new world size (sparsify/resplit.h).
  if (in.new_world() > 0)
    for (auto& [id, b] : buckets_) b.world = in.new_world();
}

}  // namespace st
