#include "sparsify/dgc.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "core/error.h"
#include "core/rng.h"
#include "sparsify/bulk/cpu_common.h"
#include "sparsify/bulk/pass.h"
#if SPARSETRAIN_WITH_CUDA
#include "sparsify/dgc_cuda.h"
#endif

namespace st {

using bulk::Elem;

namespace {
// The --sp keys, spelled once: keys() declares them, options_from() reads them.
constexpr char kSample[] = "sample", kMomentum[] = "momentum", kMask[] = "mask";

// DGC's momentum correction (Lin et al., ICLR 2018, eqs. 6-7), a pass of its own over
// buffers (x, u, v, seen): u = m u + (x - seen); v = v + u; seen = x.
class MomentumPass final : public bulk::Pass {
 public:
  explicit MomentumPass(float m) : m_(m) {}
  const char* name() const override { return "dgc momentum correction"; }
  bulk::PassResult on_host(const bulk::PassMemory& b) const override {
    const int64_t n = b.n(0);
    const float* x = b.f32(0);
    float* u = b.f32(1);
    float* v = b.f32(2);
    float* seen = b.f32(3);
#pragma omp parallel for simd schedule(static) if (n > bulk::cpu_detail::kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      u[i] = m_ * u[i] + (x[i] - seen[i]);
      v[i] += u[i];
      seen[i] = x[i];
    }
    return {};
  }
#if SPARSETRAIN_WITH_CUDA
  bulk::PassResult on_cuda(const bulk::PassMemory& b) const override {
    dgc::momentum_cuda(m_, b.f32(0), b.n(0), b.f32(1), b.f32(2), b.f32(3));
    return {};
  }
#endif

 private:
  float m_;
};

}  // namespace

void dgc::momentum(bulk::Ops& ops, float m, const bulk::Buffer& x, bulk::Buffer& u, bulk::Buffer& v,
                   bulk::Buffer& seen) {
  const int64_t n = x.size();
  ST_CHECK(u.size() == n && v.size() == n && seen.size() == n, "dgc: x of ", n,
           " elements, state of ", u.size(), ", ", v.size(), ", ", seen.size());
  ops.run_pass(std::make_shared<MomentumPass>(m), {&x, &u, &v, &seen});
}

Dgc::Dgc(const DgcOptions& options) : opt_(options) {}

std::vector<SpKey> Dgc::keys() {
  const DgcOptions o;
  return {real(kSample, o.sample, "(0, 1]", "fraction of positions sampled for the threshold"),
          real(kMomentum, o.momentum, "[0, 1)", "momentum correction coefficient m (0 = off)"),
          flag(kMask, o.mask, "momentum factor masking (with momentum correction)")};
}

DgcOptions Dgc::options_from(const SpValues& v) {
  DgcOptions o;
  o.sample = v.get(kSample);
  o.momentum = v.get(kMomentum);
  o.mask = v.get_bool(kMask);
  return o;
}

float Dgc::sampled_threshold(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& v) {
  const int64_t n = v.size();
  const int64_t s = std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(opt_.sample * static_cast<double>(n))), 1, n);
  // Positions drawn with replacement from Philox keyed by (seed, bucket, t, rank).
  const uint64_t stream = 0x4447430000000000ull ^  // "DGC"
                          (static_cast<uint64_t>(static_cast<uint32_t>(ctx.bucket)) << 40) ^
                          (static_cast<uint64_t>(static_cast<uint32_t>(ctx.rank)) << 24) ^
                          static_cast<uint64_t>(ctx.iteration);
  host_positions_.resize(static_cast<size_t>(s));
  for (int64_t j = 0; j < s; ++j) {
    const Philox4 w = philox_block(ctx.seed, stream, static_cast<uint64_t>(j));
    const uint64_t bits = (static_cast<uint64_t>(w.v[0]) << 32) | w.v[1];
    host_positions_[static_cast<size_t>(j)] = static_cast<int32_t>(
        (static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(n)) >> 64);
  }
  ops.upload(host_positions_.data(), Elem::I32, s, positions_);
  ops.gather(v, positions_, sample_);
  host_sample_.resize(static_cast<size_t>(s));
  ops.download(sample_, 0, s, host_sample_.data());
  for (float& m : host_sample_) m = std::fabs(m);
  const int64_t top = std::clamp<int64_t>(std::llround(ctx.density * static_cast<double>(s)), 1, s);
  std::nth_element(host_sample_.begin(), host_sample_.begin() + (top - 1), host_sample_.end(),
                   std::greater<float>());
  return host_sample_[static_cast<size_t>(top - 1)];
}

void Dgc::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                    DeviceSelection& out) {
  bulk::ThresholdOps& thresholds = bulk::need<bulk::ThresholdOps>(ops, name());
  const int64_t n = x.size();
  const bulk::Buffer* v = &x;
  BucketState* st = nullptr;
  if (opt_.momentum > 0) {
    st = &state_[ctx.bucket];
    ST_CHECK(st->u.empty() || st->u.size() == n, "dgc: bucket ", ctx.bucket, " changed size");
    st->u.bind(ops, n);
    st->v.bind(ops, n);
    st->seen.bind(ops, n);
    // DGC eq. 6-7 on g = x - (last residual): u = m u + g; v = v + u.
    dgc::momentum(ops, static_cast<float>(opt_.momentum), x, st->u.buf(), st->v.buf(),
                  st->seen.buf());
    v = &st->v.buf();
  }
  const float thr = sampled_threshold(ops, ctx, *v);
  ops.select_abs(*v, {0, n}, thr, /*strict=*/false, candidates_);
  if (3 * candidates_.size() > 4 * ctx.k) {
    thresholds.topk_abs_among(*v, candidates_, ctx.k, out.indices);  // hierarchical Top-k
  } else {
    std::swap(out.indices, candidates_);
  }
  out.threshold = thr;
  if (st == nullptr) {
    ops.resize(out.values, Elem::F32, 0);  // the hook sends x at the selection
    return;
  }
  // Send the accumulation; clear it (and with masking the velocity) where it was sent.
  ops.gather(st->v.buf(), out.indices, out.values);
  ops.scatter_axpy(-1.0f, out.indices, out.values, st->seen.buf());
  ops.zero_at(out.indices, st->v.buf());
  if (opt_.mask) ops.zero_at(out.indices, st->u.buf());
}

void Dgc::save_state(StateWriter& out) const {
  out.put_buckets(state_, [](StateWriter& w, const BucketState& s) {
    s.u.save(w);
    s.v.save(w);
    s.seen.save(w);
  });
}

void Dgc::load_state(StateReader& in) {
  in.get_buckets(state_, [](StateReader& r, BucketState& s) {
    s.u.load(r);
    s.v.load(r);
    s.seen.load(r);
  });
}

}  // namespace st
