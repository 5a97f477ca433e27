#include "sparsify/sparsify_hook.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/timer.h"
#include "sparsify/hook_state.h"

namespace st {

namespace {

using bulk::Elem;
using bulk::Ops;
using bulk::Phase;

// A bucket tensor behind the bulk implementation for the length of one exchange;
// released on every way out (the guarded test implementation writes it back then).
class Wrapped {
 public:
  Wrapped(Ops& ops, Tensor& t) : ops_(ops), buf_(ops.wrap(t)) {}
  ~Wrapped() { ops_.release(buf_); }
  Wrapped(const Wrapped&) = delete;
  Wrapped& operator=(const Wrapped&) = delete;
  bulk::Buffer& buf() { return buf_; }

 private:
  Ops& ops_;
  bulk::Buffer buf_;
};

}  // namespace

const std::vector<SpKey>& SparsifyHook::keys() {
  static const std::vector<SpKey> k = [] {
    SpKey scope = whole("scope", 0, "[0, 1]",
                        "where an index-selection method selects: bucket (each reducer bucket) "
                        "or tensor (each tensor of a bucket, layer-wise)");
    scope.words = {{"bucket", 0}, {"tensor", 1}};
    SpKey ef = whole("ef", 1, "[0, 1]",
                     "error feedback: on keeps what was not sent for the next step (x = g + e); "
                     "off drops it (the compressor alone, for ablations)");
    ef.words = {{"off", 0}, {"on", 1}};
    return std::vector<SpKey>{
        scope,
        whole("min_tensor", 1024, "[0, inf)",
              "scope=tensor: tensors with fewer elements are sent whole (dense)"),
        ef};
  }();
  return k;
}

SparsifyHook::SparsifyHook(SparsifierPtr sparsifier, SparsifierOptions options,
                           int64_t dense_warmup_iters)
    : sparsifier_(std::move(sparsifier)),
      opt_(std::move(options)),
      dense_warmup_(dense_warmup_iters) {
  ST_CHECK(sparsifier_ != nullptr, "SparsifyHook: no sparsifier");
  ST_CHECK(opt_.density > 0 && opt_.density <= 1, "--density must be in (0, 1], got ",
           opt_.density);
  ST_CHECK(dense_warmup_ >= 0, "--dense-warmup-iters must be >= 0, got ", dense_warmup_);
  std::map<std::string, std::string> mine;
  for (const SpKey& k : keys())
    if (auto it = opt_.params.find(k.name); it != opt_.params.end()) mine.insert(*it);
  const SpValues v(sparsifier_->name(), keys(), mine);
  scope_ = static_cast<SelectScope>(v.get_int("scope"));
  min_tensor_ = v.get_int("min_tensor");
  error_feedback_ = v.get_int("ef") == 1;
  if (scope_ == SelectScope::Tensor) {
    const Sparsifier& sp = *sparsifier_;
    const ExchangePattern p = sp.pattern();
    const char* why = sp.partitioned()              ? "selects in rotating partitions of the bucket"
                      : sp.transform_domain()       ? "selects in a transform domain"
                      : sp.packs()                  ? "quantises with its own wire format"
                      : p == ExchangePattern::Dense ? "sends everything"
                      : p == ExchangePattern::LowRank ? "compresses each tensor already"
                                                      : nullptr;
    ST_CHECK(why == nullptr, "--sp scope=tensor: --sparsifier ", sp.name(), " ", why,
             "; it runs per bucket only");
  }
}

std::string SparsifyHook::name() const {
  return sparsifier_->name();
}

Tensor SparsifyHook::residual(int bucket) const {
  auto it = state_.find(bucket);
  return it == state_.end() ? Tensor() : it->second.residual;
}

std::vector<uint8_t> SparsifyHook::save_state() const {
  HookState h;
  h.method = sparsifier_->name();
  for (const auto& [id, s] : state_)
    h.residuals[id] = s.residual.defined() ? s.residual.to_vector() : std::vector<float>();
  StateWriter rule;
  sparsifier_->save_state(rule);
  h.rule = rule.bytes();
  return write_hook_state(h);
}

void SparsifyHook::load_state(StateReader& in) {
  const HookState h = read_hook_state(in);
  ST_CHECK(h.method == sparsifier_->name(), in.what(),
           ": the checkpoint holds the state of --sparsifier ", h.method, ", this run uses ",
           sparsifier_->name());
  state_.clear();
  for (const auto& [id, v] : h.residuals) {
    BucketState& s = state_[id];
    if (!v.empty()) s.residual = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  }
  StateReader rule(h.rule.data(), h.rule.size(), in.what());
  rule.set_new_world(in.new_world());
  sparsifier_->load_state(rule);
  ST_CHECK(rule.done(), in.what(), ": trailing bytes after the sparsifier state of ", h.method);
}

std::vector<SparsifyStats> SparsifyHook::take_stats() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  std::vector<SparsifyStats> out;
  out.swap(stats_);
  return out;
}

void SparsifyHook::check_bucket_plan(const std::vector<Bucket>& buckets,
                                     const std::string& hint) const {
  for (const auto& [id, s] : state_) {
    if (!s.residual.defined()) continue;
    const bool known = id >= 0 && id < static_cast<int>(buckets.size());
    ST_CHECK(known && buckets[static_cast<size_t>(id)].numel == s.residual.numel(), "--sparsifier ",
             sparsifier_->name(), ": the checkpoint's residual of bucket ", id, " has ",
             s.residual.numel(), " elements but this run's bucket ",
             known ? "has " + std::to_string(buckets[static_cast<size_t>(id)].numel) + " elements"
                   : "plan has only " + std::to_string(buckets.size()) + " buckets",
             " (", hint, ")");
  }
}

bulk::Ops& SparsifyHook::ops_for(const Tensor& grads) {
  if (!ops_) use_ops(bulk::make_ops(grads.device()));
  ST_CHECK(ops_->device() == grads.device(), "--sparsifier ", sparsifier_->name(),
           ": the exchange runs its bulk passes on ", ops_->device().str(), " but got ",
           grads.str());
  return *ops_;
}

Selection SparsifyHook::last_selection(int bucket) const {
  const DeviceSelection& d = state_.at(bucket).selection;
  Selection s;
  s.indices.resize(static_cast<size_t>(d.indices.size()));
  s.values.resize(static_cast<size_t>(d.values.size()));
  s.packed.resize(static_cast<size_t>(d.packed.size()));
  ops_->download(d.indices, 0, d.indices.size(), s.indices.data());
  ops_->download(d.values, 0, d.values.size(), s.values.data());
  ops_->download(d.packed, 0, d.packed.size(), s.packed.data());
  s.threshold = d.threshold;
  s.partition_ms = d.partition_ms;
  s.estimate_ms = d.estimate_ms;
  return s;
}

std::vector<int32_t> SparsifyHook::last_result_indices(int bucket) const {
  const bulk::Buffer& r = state_.at(bucket).result;
  std::vector<int32_t> out(static_cast<size_t>(r.size()));
  ops_->download(r, 0, r.size(), out.data());
  return out;
}

SelectContext SparsifyHook::make_context(const Bucket& bucket, const Tensor& grads,
                                         const Communicator& comm, int64_t iteration) const {
  const int64_t n = bucket.numel;
  SelectContext ctx;
  ctx.bucket = bucket.id;
  ctx.iteration = iteration - dense_warmup_;
  ctx.rank = comm.rank();
  ctx.world = comm.size();
  ctx.density = opt_.density;
  ctx.k = kept_count(opt_.density, n);
  ctx.seed = opt_.seed;
  tensor_segments(bucket, grads, ctx);
  return ctx;
}

void SparsifyHook::use_ops(bulk::OpsPtr ops) {
  ops_ = std::make_unique<bulk::TimingOps>(std::move(ops), clock_);
}

void SparsifyHook::warmup_exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                                   SparsifyStats& st) {
  // Dense warm-up: a plain average; the residual is untouched (still zero).
  const int64_t n = bucket.numel;
  Ops& ops = *ops_;
  clock_.start(Phase::Decode);
  {
    Wrapped g(ops, grads);
    ops.allreduce_sum(comm, g.buf());
    ops.scale(g.buf(), {0, n}, 1.0f / static_cast<float>(comm.size()));
    // The optimiser reads the bucket on the compute stream once finalize() returns.
    ops.finish();
  }
  clock_.enter(Phase::Other);
  st.comm_ms = clock_.ms(Phase::Comm);
  st.decode_ms = clock_.ms(Phase::Decode);
  st.exchange_ms = st.comm_ms + st.decode_ms;
  st.local_count = st.global_count = st.k = n;
  st.actual_density = 1.0;
  st.bytes_sent = n * 4;
  st.dense = true;
  auto it = state_.find(bucket.id);
  if (it != state_.end() && it->second.residual.defined()) {
    Wrapped x(ops, it->second.residual);
    st.residual_norm = std::sqrt(ops.stats(x.buf(), {0, x.buf().size()}).sum_sq);
  }
}

void SparsifyHook::exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                            int64_t iteration) {
  Timer total;
  ops_for(grads);
  SparsifyStats st;
  st.iteration = iteration;
  st.bucket = bucket.id;
  st.n = bucket.numel;
  if (iteration < dense_warmup_)
    warmup_exchange(bucket, grads, comm, st);
  else
    sparse_exchange(bucket, grads, comm, iteration, st);
  st.total_ms = total.ms();
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.push_back(st);
}

// The bucket's state, its residual on the bucket's device and of the bucket's size.
SparsifyHook::BucketState& SparsifyHook::bucket_state(const Bucket& bucket, const Tensor& grads) {
  const int64_t n = bucket.numel;
  BucketState& s = state_[bucket.id];
  if (!s.residual.defined()) s.residual = Tensor::zeros({n}, DType::F32, grads.device());
  ST_CHECK(s.residual.numel() == n, "--sparsifier ", sparsifier_->name(), ": bucket ", bucket.id,
           " has ", n, " elements but its restored residual ", s.residual.numel(),
           " (resume with the checkpoint's --bucket-cap-mb and --first-bucket-mb)");
  if (s.residual.device() != grads.device()) s.residual = s.residual.to(grads.device());
  return s;
}

void SparsifyHook::sparse_exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                                   int64_t iteration, SparsifyStats& st) {
  Ops& ops = *ops_;
  const int64_t n = bucket.numel;
  clock_.start(Phase::Ef);
  BucketState& s = bucket_state(bucket, grads);
  // Error feedback: x = grad + residual, kept in the residual buffer.
  Wrapped xw(ops, s.residual), gw(ops, grads);
  Bufs b{xw.buf(), gw.buf(), n};
  ops.axpy(1.0f, b.g, {0, n}, b.x);
  SelectContext ctx = make_context(bucket, grads, comm, iteration);
  ctx.grad_buffer = &b.g;
  Tensor aux;
  std::optional<Wrapped> aw;
  if (aux_) {
    aux = aux_(bucket);
    ST_CHECK(!aux.defined() || (aux.numel() == n && aux.device() == grads.device()),
             sparsifier_->name(), ": the aux provider gave ", aux.str(), " for bucket ", bucket.id,
             " of ", n, " elements on ", grads.device().str());
    if (aux.defined()) ctx.aux_buffer = &aw.emplace(ops, aux).buf();
  }
  phase(Phase::Select);
  select_scoped(s, ctx, b.x, n);
  phase(Phase::Other);
  st.k = ctx.k;
  st.partition_ms = s.selection.partition_ms;
  st.estimate_ms = s.selection.estimate_ms;
  st.threshold = s.selection.threshold;
  st.local_count = s.selection.indices.size();
  // Positions live in the bucket, or in the coefficient domain of a transform method.
  const int64_t domain = sparsifier_->transform_domain() ? sparsifier_->domain_size(ctx, n) : n;
  check_positions(s.selection.indices, domain, "selected", bucket.id);
  Timer t;
  run_pattern(s, ctx, b, comm, st);
  st.exchange_ms = t.ms();
  phase(Phase::Other);
  record_phases(st);
  // A transform method's positions are coefficients (real and imaginary parts of about
  // n/2 + 1 per piece, more than n in all): its density is the share of its domain.
  st.domain = domain;
  st.actual_density = static_cast<double>(st.global_count) / static_cast<double>(domain);
  st.residual_norm = std::sqrt(ops.stats(b.x, {0, n}).sum_sq);
  // --sp ef=off: what was not sent (its norm is still reported) is dropped, so the next
  // step selects from its own gradient alone.
  if (!error_feedback_) ops.fill(b.x, {0, n}, 0.0f);
  // The bucket goes to the optimiser and the residual to checkpoints (save_state) from
  // other threads and streams: nothing may still be queued on them.
  ops.finish();
}

void SparsifyHook::run_pattern(BucketState& s, const SelectContext& ctx, Bufs b, Communicator& comm,
                               SparsifyStats& st) {
  switch (sparsifier_->pattern()) {
    case ExchangePattern::UnionAllreduce:
      return exchange_union(s, ctx, b, comm, st);
    case ExchangePattern::AllgatherSum:
      return exchange_allgather(s, ctx, b, comm, st);
    case ExchangePattern::SharedIndices:
    case ExchangePattern::LeaderIndices:
      return exchange_indices(s, ctx, b, comm, st);
    case ExchangePattern::Dense:
      return exchange_dense(s, b, comm, st);
    case ExchangePattern::LowRank:
      return exchange_low_rank(s, ctx, b, comm, st);
  }
}

void SparsifyHook::record_phases(SparsifyStats& st) const {
  st.ef_ms = clock_.ms(Phase::Ef);
  st.select_ms = clock_.ms(Phase::Select);
  st.pack_ms = clock_.ms(Phase::Pack);
  st.comm_ms = clock_.ms(Phase::Comm);
  st.decode_ms = clock_.ms(Phase::Decode);
  st.update_ms = clock_.ms(Phase::Update);
}

}  // namespace st
