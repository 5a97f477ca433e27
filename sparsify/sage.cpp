#include "sparsify/sage.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"

namespace st {

namespace {
// The --sp keys, spelled once: keys() declares them, options_from() reads them.
constexpr char kSlovinE[] = "slovin_e", kBand[] = "band", kDown[] = "down", kUp[] = "up";
}  // namespace

Sage::Sage(const SageOptions& options) : opt_(options) {}

std::vector<SpKey> Sage::keys() {
  const SageOptions o;
  return {real(kSlovinE, o.slovin_e, "(0, 1)", "margin of error of Slovin's sample size"),
          real(kBand, o.band, "(1, inf)", "gamma acts when d_exam / d leaves [1/band, band]"),
          real(kDown, o.down, "(0, inf)", "gamma below the band"),
          real(kUp, o.up, "(0, inf)", "gamma above the band")};
}

SageOptions Sage::options_from(const SpValues& v) {
  SageOptions o;
  o.slovin_e = v.get(kSlovinE);
  o.band = v.get(kBand);
  o.down = v.get(kDown);
  o.up = v.get(kUp);
  return o;
}

int64_t Sage::sample_size(int64_t n, double e) {
  const double s = static_cast<double>(n) / (1.0 + static_cast<double>(n) * e * e);
  return std::clamp<int64_t>(static_cast<int64_t>(s), 1, std::max<int64_t>(n, 1));
}

double Sage::lambda(int bucket) const {
  auto it = state_.find(bucket);
  return it == state_.end() ? 0.0 : it->second.lambda;
}

// Mean |x| at Slovin-many positions drawn from Philox keyed by (seed, bucket, t): the
// positions are drawn on the host, x is gathered there and the few hundred values
// summed on the host in draw order.
double Sage::sample_mean(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x) {
  const int64_t n = x.size(), s = sample_size(n, opt_.slovin_e);
  const uint64_t stream = 0x5341474500000000ull ^  // "SAGE"
                          (static_cast<uint64_t>(static_cast<uint32_t>(ctx.bucket)) << 40) ^
                          static_cast<uint64_t>(ctx.iteration);
  std::vector<int32_t> pos(static_cast<size_t>(s));
  for (int64_t j = 0; j < s; ++j) {
    const Philox4 w = philox_block(ctx.seed, stream, static_cast<uint64_t>(j));
    const uint64_t bits = (static_cast<uint64_t>(w.v[0]) << 32) | w.v[1];
    pos[j] = static_cast<int32_t>(
        (static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(n)) >> 64);
  }
  ops.upload(pos.data(), bulk::Elem::I32, s, sample_idx_);
  ops.gather(x, sample_idx_, sample_);
  std::vector<float> v(static_cast<size_t>(s));
  ops.download(sample_, 0, s, v.data());
  double acc = 0;
  for (float a : v) acc += std::fabs(a);
  return acc / static_cast<double>(s);
}

void Sage::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                     DeviceSelection& out) {
  bulk::ThresholdOps& thresholds = bulk::need<bulk::ThresholdOps>(ops, name());
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);
  const int64_t n = x.size();
  const double mean = sample_mean(ops, ctx, x);
  auto [it, first] = state_.try_emplace(ctx.bucket);
  BucketState& b = it->second;
  if (first) {
    b.lambda = 1.0 / (2.0 * std::sqrt(static_cast<double>(ctx.k)));
  } else {
    const double alpha = (b.sample_mean > 0 && mean > 0) ? mean / b.sample_mean : 1.0;
    const double d_exam =
        static_cast<double>(thresholds.count_abs(x, {0, n}, static_cast<float>(b.lambda * alpha),
                                                 /*strict=*/false)) /
        static_cast<double>(n);
    const double beta = 2.0 / (1.0 + std::exp(ctx.density - d_exam));
    const double ratio = d_exam / ctx.density;
    const double gamma = ratio < 1.0 / opt_.band ? opt_.down : ratio > opt_.band ? opt_.up : 1.0;
    b.lambda *= alpha * beta * gamma;
  }
  b.sample_mean = mean;
  ops.select_abs(x, {0, n}, static_cast<float>(b.lambda), /*strict=*/false, out.indices);
  out.threshold = b.lambda;
}

void Sage::save_state(StateWriter& out) const {
  out.put_buckets(state_, [](StateWriter& w, const BucketState& s) { w.put(s); });
}

void Sage::load_state(StateReader& in) {
  in.get_buckets(state_, [](StateReader& r, BucketState& s) { s = r.get<BucketState>(); });
}

}  // namespace st
