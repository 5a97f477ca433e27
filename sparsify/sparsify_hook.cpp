#include "sparsify/sparsify_hook.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

#include "core/timer.h"
#include "sparsify/hook_state.h"

namespace st {

namespace {

using bulk::Elem;
using bulk::Ops;

// Consecutive phases: to(acc) adds the time since the previous lap to acc.
class Laps {
 public:
  void to(double& acc) {
    acc += t_.ms();
    t_.reset();
  }
  // Starts the next phase without counting the time since the last lap (a callee timed it).
  void skip() { t_.reset(); }

 private:
  Timer t_;
};

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

// Padding of a padded gather of the ranks' counts: slots P max_i k_i vs sum_i k_i.
void account_padding(const std::vector<int64_t>& counts, SparsifyStats& st) {
  int64_t mx = 0, sum = 0;
  for (int64_t c : counts) {
    mx = std::max(mx, c);
    sum += c;
  }
  st.padded_slots = mx * static_cast<int64_t>(counts.size());
  st.counted_slots = sum;
  st.padding_overhead = sum > 0 ? static_cast<double>(st.padded_slots) / sum - 1.0 : 0.0;
}

// Start offsets of the bucket's tensors (its parameters' gradient views inside `grads`),
// ascending, and each one's first dimension; empty when the bucket carries no parameters
// (tests, benchmarks). Only addresses are compared: no gradient memory is read.
void tensor_segments(const Bucket& bucket, const Tensor& grads, SelectContext& ctx) {
  std::vector<std::pair<int64_t, int64_t>> seg;  // (offset, rows)
  // Positions from the views' byte offsets: no memory is touched (device buckets).
  for (const Param* p : bucket.params) {
    if (!p->grad.defined() || !p->grad.shares_storage(grads) || p->grad.dtype() != DType::F32)
      return;
    const int64_t off =
        (static_cast<int64_t>(p->grad.byte_offset()) - static_cast<int64_t>(grads.byte_offset())) /
        4;
    if (off < 0 || off + p->grad.numel() > bucket.numel) return;
    seg.emplace_back(off, p->grad.rank() > 1 ? p->grad.shape()[0] : 1);
  }
  std::sort(seg.begin(), seg.end());
  seg.erase(std::unique(seg.begin(), seg.end(),
                        [](const auto& a, const auto& b) { return a.first == b.first; }),
            seg.end());
  if (seg.empty() || seg.front().first != 0) return;
  for (const auto& [off, rows] : seg) {
    ctx.segments.push_back(off);
    ctx.rows.push_back(rows);
  }
}

std::vector<int64_t> prefix_offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> off(counts.size() + 1, 0);
  for (size_t r = 0; r < counts.size(); ++r) off[r + 1] = off[r] + counts[r];
  return off;
}

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
  if (!ops_) ops_ = bulk::make_ops(grads.device());
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

std::vector<int64_t> SparsifyHook::allgather_counts(Communicator& comm, int64_t mine) {
  ST_CHECK(mine <= INT32_MAX, "--sparsifier ", sparsifier_->name(), ": a message of ", mine,
           " entries is beyond int32 positions");
  const auto m = static_cast<int32_t>(mine);
  ops_->upload(&m, Elem::I32, 1, count_in_);
  ops_->allgather(comm, count_in_, count_all_);
  std::vector<int32_t> c(static_cast<size_t>(comm.size()));
  ops_->download(count_all_, 0, comm.size(), c.data());
  return std::vector<int64_t>(c.begin(), c.end());
}

void SparsifyHook::check_positions(const bulk::Buffer& idx, int64_t domain, const char* what,
                                   int bucket) {
  const bulk::IndexBounds b = ops_->index_bounds(idx);
  if (idx.empty() || (b.min >= 0 && b.max < domain)) return;
  ST_THROW(sparsifier_->name(), ": ", what, " index ", b.min < 0 ? b.min : b.max,
           " outside bucket ", bucket, " of ", domain, " elements");
}

void SparsifyHook::warmup_exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                                   SparsifyStats& st) {
  // Dense warm-up: a plain average; the residual is untouched (still zero).
  const int64_t n = bucket.numel;
  Ops& ops = *ops_;
  Laps lap;
  {
    Wrapped g(ops, grads);
    ops.allreduce_sum(comm, g.buf());
    lap.to(st.comm_ms);
    ops.scale(g.buf(), {0, n}, 1.0f / static_cast<float>(comm.size()));
    // The optimiser reads the bucket on the compute stream once finalize() returns.
    ops.finish();
    lap.to(st.decode_ms);
  }
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

SelectContext SparsifyHook::make_context(const Bucket& bucket, const Tensor& grads,
                                         const Communicator& comm, int64_t iteration) const {
  const int64_t n = bucket.numel;
  SelectContext ctx;
  ctx.bucket = bucket.id;
  ctx.iteration = iteration - dense_warmup_;
  ctx.rank = comm.rank();
  ctx.world = comm.size();
  ctx.density = opt_.density;
  ctx.k =
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(opt_.density * static_cast<double>(n))));
  ctx.seed = opt_.seed;
  tensor_segments(bucket, grads, ctx);
  return ctx;
}

void SparsifyHook::exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                            int64_t iteration) {
  Timer total;
  Ops& ops = ops_for(grads);
  const int64_t n = bucket.numel;
  SparsifyStats st;
  st.iteration = iteration;
  st.bucket = bucket.id;
  st.n = n;
  if (iteration < dense_warmup_) {
    warmup_exchange(bucket, grads, comm, st);
    st.total_ms = total.ms();
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.push_back(st);
    return;
  }
  BucketState& s = state_[bucket.id];
  if (!s.residual.defined()) s.residual = Tensor::zeros({n}, DType::F32, grads.device());
  ST_CHECK(s.residual.numel() == n, "--sparsifier ", sparsifier_->name(), ": bucket ", bucket.id,
           " has ", n, " elements but its restored residual ", s.residual.numel(),
           " (resume with the checkpoint's --bucket-cap-mb and --first-bucket-mb)");
  if (s.residual.device() != grads.device()) s.residual = s.residual.to(grads.device());
  // Error feedback: x = grad + residual, kept in the residual buffer.
  Laps lap;
  Wrapped xw(ops, s.residual), gw(ops, grads);
  Bufs b{xw.buf(), gw.buf(), n};
  ops.axpy(1.0f, b.g, {0, n}, b.x);
  lap.to(st.ef_ms);

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
  // Positions live in the bucket, or in the coefficient domain of a transform method.
  const int64_t domain = sparsifier_->transform_domain() ? sparsifier_->domain_size(ctx, n) : n;
  st.k = ctx.k;
  lap.to(st.ef_ms);
  select_scoped(s, ctx, b.x, n);
  lap.to(st.select_ms);
  st.partition_ms = s.selection.partition_ms;
  st.estimate_ms = s.selection.estimate_ms;
  st.threshold = s.selection.threshold;
  st.local_count = s.selection.indices.size();
  check_positions(s.selection.indices, domain, "selected", bucket.id);
  Timer t;
  switch (sparsifier_->pattern()) {
    case ExchangePattern::UnionAllreduce:
      exchange_union(s, ctx, b, comm, st);
      break;
    case ExchangePattern::AllgatherSum:
      exchange_allgather(s, ctx, b, comm, st);
      break;
    case ExchangePattern::SharedIndices:
    case ExchangePattern::LeaderIndices:
      exchange_indices(s, ctx, b, comm, st);
      break;
    case ExchangePattern::Dense:
      exchange_dense(s, b, comm, st);
      break;
    case ExchangePattern::LowRank:
      exchange_low_rank(s, ctx, b, comm, st);
      break;
  }
  st.exchange_ms = t.ms();
  st.actual_density = static_cast<double>(st.global_count) / static_cast<double>(n);
  st.residual_norm = std::sqrt(ops.stats(b.x, {0, n}).sum_sq);
  // --sp ef=off: what was not sent (its norm is still reported) is dropped, so the next
  // step selects from its own gradient alone.
  if (!error_feedback_) ops.fill(b.x, {0, n}, 0.0f);
  // The bucket goes to the optimiser and the residual to checkpoints (save_state) from
  // other threads and streams: nothing may still be queued on them.
  ops.finish();
  st.total_ms = total.ms();
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.push_back(st);
}

// Tensor scope: each tensor of at least min_tensor elements is its own selection unit
// (k = floor(d L), own rule state under unit_id); smaller tensors are selected whole.
// Indices come back in bucket positions; values are filled from x where the method
// left them to the hook, so every unit's entries line up.
void SparsifyHook::select_scoped(BucketState& s, const SelectContext& ctx, const bulk::Buffer& x,
                                 int64_t n) {
  Ops& ops = *ops_;
  DeviceSelection& out = s.selection;
  out.clear_scalars();
  if (scope_ == SelectScope::Bucket || ctx.segments.empty()) {
    s.units.clear();
    sparsifier_->select_on(ops, ctx, x, out);
    return;
  }
  const size_t S = ctx.segments.size();
  ST_CHECK(S <= static_cast<size_t>(kUnitsPerBucket), "--sp scope=tensor: bucket ", ctx.bucket,
           " holds ", S, " tensors, more than ", kUnitsPerBucket);
  s.units.resize(S);
  s.unit.resize(S);
  int64_t total = 0;
  for (size_t j = 0; j < S; ++j) {
    Unit& u = s.units[j];
    DeviceSelection& one = s.unit[j];
    u.begin = ctx.segments[j];
    u.end = j + 1 < S ? ctx.segments[j + 1] : n;
    u.id = unit_id(ctx.bucket, j);
    const int64_t len = u.end - u.begin;
    u.dense = len < min_tensor_;
    u.k = std::max<int64_t>(1, static_cast<int64_t>(std::floor(ctx.density * len)));
    one.clear_scalars();
    const bulk::Buffer xs = ops.slice(x, u.begin, len);
    if (u.dense) {
      ops.iota(one.indices, len, 0);
      ops.resize(one.values, Elem::F32, 0);
    } else {
      SelectContext c = ctx;
      c.bucket = u.id;
      c.k = u.k;
      c.segments = {0};
      c.rows = {ctx.rows[j]};
      bulk::Buffer gs, as;
      if (ctx.grad_buffer) c.grad_buffer = &(gs = ops.slice(*ctx.grad_buffer, u.begin, len));
      if (ctx.aux_buffer) c.aux_buffer = &(as = ops.slice(*ctx.aux_buffer, u.begin, len));
      sparsifier_->select_on(ops, c, xs, one);
      out.threshold = std::max(out.threshold, one.threshold);
      out.partition_ms += one.partition_ms;
      out.estimate_ms += one.estimate_ms;
    }
    if (one.values.size() != one.indices.size()) ops.gather(xs, one.indices, one.values);
    ops.offset_indices(one.indices, static_cast<int32_t>(u.begin));
    total += one.indices.size();
  }
  ops.resize(out.indices, Elem::I32, total);
  ops.resize(out.values, Elem::F32, total);
  ops.resize(out.packed, Elem::U32, 0);
  int64_t at = 0;
  for (const DeviceSelection& one : s.unit) {
    ops.copy(one.indices, 0, out.indices, at, one.indices.size());
    ops.copy(one.values, 0, out.values, at, one.values.size());
    at += one.indices.size();
  }
}

void SparsifyHook::feed_back(const BucketState& s, const SelectContext& ctx, int64_t n,
                             int64_t global, const std::vector<int64_t>& counts,
                             const RankIndices& rank_indices) {
  if (s.units.empty()) {
    sparsifier_->observe({ctx.bucket, ctx.iteration, n, ctx.k, global, counts});
    return;
  }
  const size_t S = s.units.size();
  const std::vector<int64_t> result_counts =
      ops_->segment_counts(s.result, 0, s.result.size(), ctx.segments);
  std::vector<std::vector<int64_t>> per_rank(S, std::vector<int64_t>(counts.size(), 0));
  for (size_t r = 0; r < counts.size(); ++r) {
    const RankSlice q = rank_indices(static_cast<int>(r));
    const std::vector<int64_t> one = ops_->segment_counts(*q.idx, q.begin, q.count, ctx.segments);
    for (size_t j = 0; j < S; ++j) per_rank[j][r] = one[j];
  }
  for (size_t j = 0; j < S; ++j) {
    const Unit& u = s.units[j];
    if (u.dense) continue;
    sparsifier_->observe(
        {u.id, ctx.iteration, u.end - u.begin, u.k, result_counts[j], per_rank[j]});
  }
}

// Dense: the whole x travels, so the residual becomes zero.
void SparsifyHook::exchange_dense(BucketState& s, Bufs b, Communicator& comm, SparsifyStats& st) {
  Ops& ops = *ops_;
  Laps lap;
  ops.copy(b.x, 0, b.g, 0, b.n);
  lap.to(st.pack_ms);
  ops.allreduce_sum(comm, b.g);
  lap.to(st.comm_ms);
  ops.scale(b.g, {0, b.n}, 1.0f / static_cast<float>(comm.size()));
  lap.to(st.decode_ms);
  ops.fill(b.x, {0, b.n}, 0.0f);
  lap.to(st.update_ms);
  ops.resize(s.result, Elem::I32, 0);
  st.global_count = b.n;
  st.bytes_sent = b.n * 4;
}

// Union-allreduce (kljp family): allgather counts, allgather indices padded to max k_i,
// union in rank order (identical on every rank), allreduce x at the union, divide by P.
void SparsifyHook::exchange_union(BucketState& s, const SelectContext& ctx, Bufs b,
                                  Communicator& comm, SparsifyStats& st) {
  Ops& ops = *ops_;
  const int P = comm.size();
  Laps lap;
  const std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  lap.to(st.comm_ms);
  const int64_t maxk = *std::max_element(counts.begin(), counts.end());
  account_padding(counts, st);
  // The slots past a rank's count are never read (the counts bound every rank's part).
  ops.resize(s.mine, Elem::I32, maxk);
  ops.copy(s.selection.indices, 0, s.mine, 0, st.local_count);
  lap.to(st.pack_ms);
  ops.allgather(comm, s.mine, s.idx_all);
  lap.to(st.comm_ms);
  std::vector<int64_t> offsets(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) offsets[r] = r * maxk;
  ops.union_of(s.idx_all, offsets, counts, b.n, s.result);
  lap.to(st.decode_ms);
  const int64_t u = s.result.size();
  ops.gather(b.x, s.result, s.values);
  lap.to(st.pack_ms);
  ops.allreduce_sum(comm, s.values);
  lap.to(st.comm_ms);
  ops.fill(b.g, {0, b.n}, 0.0f);
  ops.scatter_scaled(s.result, s.values, 1.0f / static_cast<float>(P), b.g);
  lap.to(st.decode_ms);
  ops.zero_at(s.result, b.x);  // every rank transmitted x at every union position
  lap.to(st.update_ms);
  st.global_count = u;
  st.bytes_sent = 8 + 4 * maxk + 4 * u;
  feed_back(s, ctx, b.n, u, counts, [&](int r) {
    return RankSlice{&s.idx_all, offsets[r], counts[r]};
  });
}

// Allgather-sum (GRACE family): allgatherv (index, value) pairs, scatter-add, divide by
// P. A rank contributed only its own (possibly quantised) values, so its residual keeps
// x - value at its own positions. Two optional twists, both declared by the sparsifier:
//   - packed wire format: the ranks' `packed` words travel instead of the pairs, and
//     every rank unpacks every message (VGC, FFT, QSGD, TernGrad);
//   - transform domain: the pairs index coefficients; their sum is decoded back into the
//     bucket, and the residual is x - decode(own coefficients) (FFT).
void SparsifyHook::exchange_allgather(BucketState& s, const SelectContext& ctx, Bufs b,
                                      Communicator& comm, SparsifyStats& st) {
  Ops& ops = *ops_;
  const int P = comm.size();
  Sparsifier& sp = *sparsifier_;
  DeviceSelection& sel = s.selection;
  const bool transform = sp.transform_domain();
  Laps lap;
  if (sel.values.size() != sel.indices.size()) {
    ST_CHECK(!transform && !sp.packs(), sp.name(), ": select_on() gave ", sel.indices.size(),
             " indices but ", sel.values.size(), " values");
    ops.gather(b.x, sel.indices, sel.values);
  }
  lap.to(st.pack_ms);
  const std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  lap.to(st.comm_ms);
  account_padding(counts, st);
  if (sp.packs()) {
    gather_packed(s, ctx, b.n, counts, comm, st);
    lap.skip();
  } else {
    ops.allgatherv(comm, sel.indices, counts, s.idx_all);
    ops.allgatherv(comm, sel.values, counts, s.val_all);
    lap.to(st.comm_ms);
    st.bytes_sent = 8 + 8 * st.local_count;
  }
  // Scatter-add into the bucket, or into the coefficient domain of a transform method.
  const int64_t dn = transform ? sp.domain_size(ctx, b.n) : b.n;
  bulk::Buffer& acc = transform ? s.domain : b.g;
  if (transform) ops.resize(s.domain, Elem::F32, dn);
  ops.fill(acc, {0, dn}, 0.0f);
  check_positions(s.idx_all, dn, "received", ctx.bucket);
  ops.scatter_add(s.idx_all, s.val_all, acc);
  const std::vector<int64_t> offsets = prefix_offsets(counts);
  ops.union_of(s.idx_all, offsets, counts, dn, s.result);
  const float inv = 1.0f / static_cast<float>(P);
  if (transform) {
    sp.decode_on(ops, ctx, s.domain, b.n, b.g);
    ops.scale(b.g, {0, b.n}, inv);
    lap.to(st.decode_ms);
    // The rank's own contribution, decoded the same way, leaves the residual.
    ops.fill(s.domain, {0, dn}, 0.0f);
    ops.scatter_add(sel.indices, sel.values, s.domain);
    sp.decode_on(ops, ctx, s.domain, b.n, s.tmp);
    ops.axpy(-1.0f, s.tmp, {0, b.n}, b.x);
  } else {
    ops.gather(b.g, s.result, s.tmp);
    ops.scatter_scaled(s.result, s.tmp, inv, b.g);
    lap.to(st.decode_ms);
    ops.scatter_axpy(-1.0f, sel.indices, sel.values, b.x);
  }
  lap.to(st.update_ms);
  st.global_count = s.result.size();
  feed_back(s, ctx, b.n, st.global_count, counts, [&](int r) {
    return RankSlice{&s.idx_all, offsets[r], counts[r]};
  });
}

void SparsifyHook::gather_packed(BucketState& s, const SelectContext& ctx, int64_t n,
                                 const std::vector<int64_t>& counts, Communicator& comm,
                                 SparsifyStats& st) {
  Ops& ops = *ops_;
  Sparsifier& sp = *sparsifier_;
  const DeviceSelection& sel = s.selection;
  Laps lap;
  const int64_t mine = sel.packed.size();
  const std::vector<int64_t> words = allgather_counts(comm, mine);
  lap.to(st.comm_ms);
  ops.allgatherv(comm, sel.packed, words, s.words_all);
  lap.to(st.comm_ms);
  const std::vector<int64_t> at = prefix_offsets(counts), wat = prefix_offsets(words);
  ops.resize(s.idx_all, Elem::I32, at.back());
  ops.resize(s.val_all, Elem::F32, at.back());
  for (size_t r = 0; r < counts.size(); ++r) {
    DeviceSelection& one = s.one;
    sp.unpack_on(ops, ctx, n, s.words_all, wat[r], words[r], one);
    ST_CHECK(one.indices.size() == counts[r] && one.values.size() == one.indices.size(), sp.name(),
             ": rank ", r, "'s packed message decodes to ", one.indices.size(),
             " entries, expected ", counts[r]);
    if (static_cast<int>(r) == ctx.rank)
      ST_CHECK(ops.same_bits(one.indices, sel.indices) && ops.same_bits(one.values, sel.values),
               sp.name(), ": unpack(packed) differs from the selection on rank ", r);
    ops.copy(one.indices, 0, s.idx_all, at[r], counts[r]);
    ops.copy(one.values, 0, s.val_all, at[r], counts[r]);
  }
  lap.to(st.decode_ms);
  st.bytes_sent = 16 + 4 * mine;
}

// Shared indices (Random-k) or the leader's indices (CLT-k): every rank allreduces x at
// the same positions, so no index gathering is needed beyond the leader's broadcast.
void SparsifyHook::exchange_indices(BucketState& s, const SelectContext& ctx, Bufs b,
                                    Communicator& comm, SparsifyStats& st) {
  Ops& ops = *ops_;
  const int P = comm.size();
  bulk::Buffer& idx = s.result;
  int64_t idx_bytes = 0;
  const bool leader_pattern = sparsifier_->pattern() == ExchangePattern::LeaderIndices;
  const int leader = static_cast<int>(ctx.iteration % P);
  Laps lap;
  if (leader_pattern) {
    const auto mine = static_cast<int32_t>(s.selection.indices.size());
    ops.upload(&mine, Elem::I32, 1, count_in_);
    lap.to(st.pack_ms);
    ops.broadcast(comm, count_in_, leader);
    lap.to(st.comm_ms);
    int32_t c = 0;
    ops.download(count_in_, 0, 1, &c);
    ops.resize(idx, Elem::I32, c);
    if (ctx.rank == leader) ops.copy(s.selection.indices, 0, idx, 0, c);
    lap.to(st.pack_ms);
    ops.broadcast(comm, idx, leader);
    lap.to(st.comm_ms);
    idx_bytes = ctx.rank == leader ? 8 + 4 * int64_t{c} : 0;
  } else {
    ops.resize(idx, Elem::I32, s.selection.indices.size());
    ops.copy(s.selection.indices, 0, idx, 0, idx.size());
  }
  const int64_t u = idx.size();
  ops.gather(b.x, idx, s.values);
  lap.to(st.pack_ms);
  ops.allreduce_sum(comm, s.values);
  lap.to(st.comm_ms);
  ops.fill(b.g, {0, b.n}, 0.0f);
  ops.scatter_scaled(idx, s.values, 1.0f / static_cast<float>(P), b.g);
  lap.to(st.decode_ms);
  ops.zero_at(idx, b.x);
  lap.to(st.update_ms);
  st.global_count = u;
  st.bytes_sent = idx_bytes + 4 * u;
  std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  lap.to(st.comm_ms);
  feed_back(s, ctx, b.n, u, counts, [&](int r) {
    const bool sent = !leader_pattern || r == leader;
    return RankSlice{&idx, 0, sent ? u : int64_t{0}};
  });
}

// Low-rank (PowerSGD): select_on() gave the first message; its sum over the ranks yields
// the second one (second_message_on), whose sum decode_on() turns into the update. The
// residual is x - decode(own second message): linear, so the ranks' contributions add
// up to P times the update exactly.
void SparsifyHook::exchange_low_rank(BucketState& s, const SelectContext& ctx, Bufs b,
                                     Communicator& comm, SparsifyStats& st) {
  Ops& ops = *ops_;
  Sparsifier& sp = *sparsifier_;
  const int P = comm.size();
  Laps lap;
  const bulk::Buffer& first = s.selection.values;
  ops.resize(s.m1, Elem::F32, first.size());
  ops.copy(first, 0, s.m1, 0, first.size());
  lap.to(st.pack_ms);
  ops.allreduce_sum(comm, s.m1);
  lap.to(st.comm_ms);
  sp.second_message_on(ops, ctx, b.x, s.m1, s.tmp);  // this rank's second message
  ops.resize(s.m2, Elem::F32, s.tmp.size());
  ops.copy(s.tmp, 0, s.m2, 0, s.tmp.size());
  lap.to(st.pack_ms);
  ops.allreduce_sum(comm, s.m2);
  lap.to(st.comm_ms);
  sp.decode_on(ops, ctx, s.m2, b.n, b.g);
  ops.scale(b.g, {0, b.n}, 1.0f / static_cast<float>(P));
  lap.to(st.decode_ms);
  sp.decode_on(ops, ctx, s.tmp, b.n, s.values);
  ops.axpy(-1.0f, s.values, {0, b.n}, b.x);
  lap.to(st.update_ms);
  ops.resize(s.result, Elem::I32, 0);
  const int64_t floats = s.m1.size() + s.m2.size();
  st.local_count = st.global_count = floats;
  st.bytes_sent = 4 * floats;
  ExchangeFeedback fb{ctx.bucket, ctx.iteration, b.n,
                      ctx.k,      floats,        std::vector<int64_t>(P, floats)};
  fb.summed_buffer = &s.m2;
  fb.summed_size = s.m2.size();
  std::vector<float> host;
  if (!sp.device_ready()) {  // the host form reads the sum through a pointer
    host.resize(static_cast<size_t>(s.m2.size()));
    ops.download(s.m2, 0, s.m2.size(), host.data());
    fb.summed = host.data();
  }
  sp.observe(fb);
}

}  // namespace st
