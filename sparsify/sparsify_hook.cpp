#include "sparsify/sparsify_hook.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/ops.h"
#include "core/timer.h"
#include "sparsify/hook_state.h"

namespace st {

namespace {

// Consecutive phases: to(acc) adds the time since the previous lap to acc.
class Laps {
 public:
  void to(double& acc) {
    acc += t_.ms();
    t_.reset();
  }

 private:
  Timer t_;
};

// Allgathers one int64 per rank.
std::vector<int64_t> allgather_counts(Communicator& comm, int64_t mine) {
  Tensor in = Tensor::zeros({1}, DType::I64), out = Tensor::zeros({comm.size()}, DType::I64);
  in.data<int64_t>()[0] = mine;
  comm.allgather(in, out);
  const int64_t* p = out.data<int64_t>();
  return std::vector<int64_t>(p, p + comm.size());
}

double l2_norm(const float* x, int64_t n) {
  double sq = 0;
#pragma omp parallel for reduction(+ : sq) schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) sq += static_cast<double>(x[i]) * x[i];
  return std::sqrt(sq);
}

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
// (tests, benchmarks).
void tensor_segments(const Bucket& bucket, const Tensor& grads, SelectContext& ctx) {
  std::vector<std::pair<int64_t, int64_t>> seg;  // (offset, rows)
  for (const Param* p : bucket.params) {
    if (!p->grad.defined() || !p->grad.device().is_cpu()) return;
    const int64_t off = p->grad.f32() - grads.f32();
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

// Per-segment histogram of sorted-or-not positions: out[j] = count in [seg[j], seg[j+1]).
void count_per_segment(const std::vector<int64_t>& seg, const int32_t* idx, int64_t count,
                       std::vector<int64_t>& out) {
  out.assign(seg.size(), 0);
  for (int64_t j = 0; j < count; ++j) {
    const auto it = std::upper_bound(seg.begin(), seg.end(), static_cast<int64_t>(idx[j]));
    ++out[static_cast<size_t>(it - seg.begin()) - 1];
  }
}

}  // namespace

const std::vector<SpKey>& SparsifyHook::keys() {
  static const std::vector<SpKey> k = [] {
    SpKey scope = whole("scope", 0, "[0, 1]",
                        "where an index-selection method selects: bucket (each reducer bucket) "
                        "or tensor (each tensor of a bucket, layer-wise)");
    scope.words = {{"bucket", 0}, {"tensor", 1}};
    return std::vector<SpKey>{
        scope, whole("min_tensor", 1024, "[0, inf)",
                     "scope=tensor: tensors with fewer elements are sent whole (dense)")};
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

void SparsifyHook::check_bucket_plan(const std::vector<Bucket>& buckets) const {
  for (const auto& [id, s] : state_) {
    if (!s.residual.defined()) continue;
    const bool known = id >= 0 && id < static_cast<int>(buckets.size());
    ST_CHECK(known && buckets[static_cast<size_t>(id)].numel == s.residual.numel(), "--sparsifier ",
             sparsifier_->name(), ": the checkpoint's residual of bucket ", id, " has ",
             s.residual.numel(), " elements but this run's bucket ",
             known ? "has " + std::to_string(buckets[static_cast<size_t>(id)].numel) + " elements"
                   : "plan has only " + std::to_string(buckets.size()) + " buckets",
             " (resume with the checkpoint's --bucket-cap-mb and --first-bucket-mb)");
  }
}

void SparsifyHook::warmup_exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                                   SparsifyStats& st) {
  // Dense warm-up: a plain average; the residual is untouched (still zero).
  const int64_t n = bucket.numel;
  Laps lap;
  comm.allreduce(grads);
  lap.to(st.comm_ms);
  scale_inplace(grads, 1.0f / static_cast<float>(comm.size()));
  lap.to(st.decode_ms);
  st.exchange_ms = st.comm_ms + st.decode_ms;
  st.local_count = st.global_count = st.k = n;
  st.actual_density = 1.0;
  st.bytes_sent = n * 4;
  st.dense = true;
  auto it = state_.find(bucket.id);
  if (it != state_.end() && it->second.residual.defined())
    st.residual_norm = l2_norm(it->second.residual.f32(), it->second.residual.numel());
}

void SparsifyHook::exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                            int64_t iteration) {
  ST_CHECK(grads.device().is_cpu(), "--sparsifier ", sparsifier_->name(),
           ": the sparsified exchange runs on CPU gradients; got ", grads.str());
  Timer total;
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
  if (!s.residual.defined()) s.residual = Tensor::zeros({n});
  ST_CHECK(s.residual.numel() == n, "--sparsifier ", sparsifier_->name(), ": bucket ", bucket.id,
           " has ", n, " elements but its restored residual ", s.residual.numel(),
           " (resume with the checkpoint's --bucket-cap-mb and --first-bucket-mb)");
  // Error feedback: x = grad + residual, kept in the residual buffer.
  Laps lap;
  float* x = s.residual.f32();
  float* g = grads.f32();
#pragma omp parallel for simd if (n > 65536) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] += g[i];
  lap.to(st.ef_ms);

  SelectContext ctx;
  ctx.bucket = bucket.id;
  ctx.iteration = iteration - dense_warmup_;
  ctx.rank = comm.rank();
  ctx.world = comm.size();
  ctx.density = opt_.density;
  ctx.k =
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(opt_.density * static_cast<double>(n))));
  ctx.seed = opt_.seed;
  ctx.grad = g;
  Tensor aux;
  if (aux_) {
    aux = aux_(bucket);
    ST_CHECK(!aux.defined() || (aux.numel() == n && aux.device().is_cpu()), sparsifier_->name(),
             ": the aux provider gave ", aux.str(), " for bucket ", bucket.id, " of ", n,
             " elements");
    if (aux.defined()) ctx.aux = aux.f32();
  }
  tensor_segments(bucket, grads, ctx);
  // Positions live in the bucket, or in the coefficient domain of a transform method.
  const int64_t domain = sparsifier_->transform_domain() ? sparsifier_->domain_size(ctx, n) : n;
  if (static_cast<int64_t>(s.marker.size()) < domain) s.marker.assign(domain, 0);
  st.k = ctx.k;
  lap.to(st.ef_ms);
  select_scoped(s, ctx, x, n);
  lap.to(st.select_ms);
  st.partition_ms = s.selection.partition_ms;
  st.estimate_ms = s.selection.estimate_ms;
  st.threshold = s.selection.threshold;
  st.local_count = static_cast<int64_t>(s.selection.indices.size());
  for (int32_t i : s.selection.indices)
    ST_CHECK(i >= 0 && i < domain, sparsifier_->name(), ": selected index ", i, " outside bucket ",
             bucket.id, " of ", domain, " elements");
  Timer t;
  switch (sparsifier_->pattern()) {
    case ExchangePattern::UnionAllreduce:
      exchange_union(s, ctx, x, g, n, comm, st);
      break;
    case ExchangePattern::AllgatherSum:
      exchange_allgather(s, ctx, x, g, n, comm, st);
      break;
    case ExchangePattern::SharedIndices:
    case ExchangePattern::LeaderIndices:
      exchange_indices(s, ctx, x, g, n, comm, st);
      break;
    case ExchangePattern::Dense:
      exchange_dense(s, x, grads, comm, st);
      break;
    case ExchangePattern::LowRank:
      exchange_low_rank(s, ctx, x, g, n, comm, st);
      break;
  }
  st.exchange_ms = t.ms();
  st.actual_density = static_cast<double>(st.global_count) / static_cast<double>(n);
  st.residual_norm = l2_norm(x, n);
  st.total_ms = total.ms();
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.push_back(st);
}

// Tensor scope: each tensor of at least min_tensor elements is its own selection unit
// (k = floor(d L), own rule state under unit_id); smaller tensors are selected whole.
// Indices come back in bucket positions; values are filled from x where the method
// left them to the hook, so every unit's entries line up.
void SparsifyHook::select_scoped(BucketState& s, const SelectContext& ctx, const float* x,
                                 int64_t n) {
  Selection& out = s.selection;
  out.clear();
  if (scope_ == SelectScope::Bucket || ctx.segments.empty()) {
    s.units.clear();
    sparsifier_->select(ctx, x, n, out);
    return;
  }
  const size_t S = ctx.segments.size();
  ST_CHECK(S <= static_cast<size_t>(kUnitsPerBucket), "--sp scope=tensor: bucket ", ctx.bucket,
           " holds ", S, " tensors, more than ", kUnitsPerBucket);
  s.units.resize(S);
  Selection one;
  for (size_t j = 0; j < S; ++j) {
    Unit& u = s.units[j];
    u.begin = ctx.segments[j];
    u.end = j + 1 < S ? ctx.segments[j + 1] : n;
    u.id = unit_id(ctx.bucket, j);
    const int64_t len = u.end - u.begin;
    u.dense = len < min_tensor_;
    u.k = std::max<int64_t>(1, static_cast<int64_t>(std::floor(ctx.density * len)));
    one.clear();
    if (u.dense) {
      for (int64_t i = 0; i < len; ++i) one.indices.push_back(static_cast<int32_t>(i));
    } else {
      SelectContext c = ctx;
      c.bucket = u.id;
      c.k = u.k;
      c.segments = {0};
      c.rows = {ctx.rows[j]};
      c.grad = ctx.grad ? ctx.grad + u.begin : nullptr;
      c.aux = ctx.aux ? ctx.aux + u.begin : nullptr;
      sparsifier_->select(c, x + u.begin, len, one);
      out.threshold = std::max(out.threshold, one.threshold);
      out.partition_ms += one.partition_ms;
      out.estimate_ms += one.estimate_ms;
    }
    const bool own_values = one.values.size() == one.indices.size();
    for (size_t q = 0; q < one.indices.size(); ++q) {
      const int32_t i = one.indices[q] + static_cast<int32_t>(u.begin);
      out.indices.push_back(i);
      out.values.push_back(own_values ? one.values[q] : x[i]);
    }
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
  std::vector<int64_t> result_counts, one;
  count_per_segment(ctx.segments, s.result.data(), static_cast<int64_t>(s.result.size()),
                    result_counts);
  std::vector<std::vector<int64_t>> per_rank(S, std::vector<int64_t>(counts.size(), 0));
  for (size_t r = 0; r < counts.size(); ++r) {
    const auto [idx, c] = rank_indices(static_cast<int>(r));
    count_per_segment(ctx.segments, idx, c, one);
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
void SparsifyHook::exchange_dense(BucketState& s, float* x, Tensor& grads, Communicator& comm,
                                  SparsifyStats& st) {
  const int64_t n = grads.numel();
  float* g = grads.f32();
  Laps lap;
  std::copy(x, x + n, g);
  lap.to(st.pack_ms);
  comm.allreduce(grads);
  lap.to(st.comm_ms);
  scale_inplace(grads, 1.0f / static_cast<float>(comm.size()));
  lap.to(st.decode_ms);
  std::fill(x, x + n, 0.0f);
  lap.to(st.update_ms);
  s.result.clear();
  st.global_count = n;
  st.bytes_sent = n * 4;
}

// Union-allreduce (kljp family): allgather counts, allgather indices padded to max k_i,
// union in rank order (identical on every rank), allreduce x at the union, divide by P.
void SparsifyHook::exchange_union(BucketState& s, const SelectContext& ctx, float* x, float* g,
                                  int64_t n, Communicator& comm, SparsifyStats& st) {
  const int P = comm.size();
  Laps lap;
  const std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  lap.to(st.comm_ms);
  const int64_t maxk = *std::max_element(counts.begin(), counts.end());
  account_padding(counts, st);
  Tensor mine = Tensor::empty({maxk}, DType::I32), all = Tensor::empty({maxk * P}, DType::I32);
  int32_t* m = mine.data<int32_t>();
  std::copy(s.selection.indices.begin(), s.selection.indices.end(), m);
  std::fill(m + st.local_count, m + maxk, -1);
  lap.to(st.pack_ms);
  if (maxk > 0) comm.allgather(mine, all);
  lap.to(st.comm_ms);
  const int32_t* a = all.data<int32_t>();
  s.result.clear();
  for (int r = 0; r < P; ++r)
    for (int64_t j = 0; j < counts[r]; ++j) {
      const int32_t i = a[r * maxk + j];
      if (!s.marker[i]) {
        s.marker[i] = 1;
        s.result.push_back(i);
      }
    }
  lap.to(st.decode_ms);
  const int64_t u = static_cast<int64_t>(s.result.size());
  Tensor vals = Tensor::empty({u});
  float* v = vals.f32();
  for (int64_t j = 0; j < u; ++j) v[j] = x[s.result[j]];
  lap.to(st.pack_ms);
  comm.allreduce(vals);
  lap.to(st.comm_ms);
  std::fill(g, g + n, 0.0f);
  const float inv = 1.0f / static_cast<float>(P);
  for (int64_t j = 0; j < u; ++j) g[s.result[j]] = v[j] * inv;
  lap.to(st.decode_ms);
  for (int32_t i : s.result) {
    x[i] = 0.0f;  // every rank transmitted x at every union position
    s.marker[i] = 0;
  }
  lap.to(st.update_ms);
  st.global_count = u;
  st.bytes_sent = 8 + 4 * maxk + 4 * u;
  feed_back(s, ctx, n, u, counts, [&](int r) { return std::make_pair(a + r * maxk, counts[r]); });
}

// Allgather-sum (GRACE family): allgatherv (index, value) pairs, scatter-add, divide by
// P. A rank contributed only its own (possibly quantised) values, so its residual keeps
// x - value at its own positions. Two optional twists, both declared by the sparsifier:
//   - packed wire format: the ranks' `packed` words travel instead of the pairs, and
//     every rank unpacks every message (VGC, FFT, QSGD, TernGrad);
//   - transform domain: the pairs index coefficients; their sum is decoded back into the
//     bucket, and the residual is x - decode(own coefficients) (FFT).
void SparsifyHook::exchange_allgather(BucketState& s, const SelectContext& ctx, float* x, float* g,
                                      int64_t n, Communicator& comm, SparsifyStats& st) {
  const int P = comm.size();
  Sparsifier& sp = *sparsifier_;
  Selection& sel = s.selection;
  const bool transform = sp.transform_domain();
  Laps lap;
  if (sel.values.size() != sel.indices.size()) {
    ST_CHECK(!transform && !sp.packs(), sp.name(), ": select() gave ", sel.indices.size(),
             " indices but ", sel.values.size(), " values");
    sel.values.resize(sel.indices.size());
    for (size_t j = 0; j < sel.indices.size(); ++j) sel.values[j] = x[sel.indices[j]];
  }
  lap.to(st.pack_ms);
  const std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  lap.to(st.comm_ms);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  account_padding(counts, st);
  Tensor idx_all = Tensor::empty({total}, DType::I32), val_all = Tensor::empty({total});
  lap.to(st.pack_ms);
  if (sp.packs()) {
    const int64_t mine = static_cast<int64_t>(sel.packed.size());
    lap.to(st.pack_ms);
    const std::vector<int64_t> words = allgather_counts(comm, mine);
    lap.to(st.comm_ms);
    int64_t total_words = 0;
    for (int64_t w : words) total_words += w;
    Tensor w_in = Tensor::empty({mine}, DType::I32),
           w_all = Tensor::empty({total_words}, DType::I32);
    std::copy(sel.packed.begin(), sel.packed.end(), w_in.data<int32_t>());
    lap.to(st.pack_ms);
    if (total_words > 0) comm.allgatherv(w_in, w_all, words);
    lap.to(st.comm_ms);
    const uint32_t* wa = reinterpret_cast<const uint32_t*>(w_all.data<int32_t>());
    Selection one;
    int64_t at = 0;
    for (int r = 0; r < P; ++r) {
      one.clear();
      sp.unpack(ctx, n, wa, words[r], one);
      wa += words[r];
      ST_CHECK(static_cast<int64_t>(one.indices.size()) == counts[r] &&
                   one.values.size() == one.indices.size(),
               sp.name(), ": rank ", r, "'s packed message decodes to ", one.indices.size(),
               " entries, expected ", counts[r]);
      if (r == ctx.rank)
        ST_CHECK(
            one.indices == sel.indices && one.values.size() == sel.values.size() &&
                (sel.values.empty() ||  // memcmp's pointers must not be null
                 std::memcmp(one.values.data(), sel.values.data(), 4 * sel.values.size()) == 0),
            sp.name(), ": unpack(packed) differs from the selection on rank ", r);
      std::copy(one.indices.begin(), one.indices.end(), idx_all.data<int32_t>() + at);
      std::copy(one.values.begin(), one.values.end(), val_all.f32() + at);
      at += counts[r];
    }
    st.bytes_sent = 16 + 4 * mine;
  } else {
    Tensor idx_in = Tensor::empty({st.local_count}, DType::I32),
           val_in = Tensor::empty({st.local_count});
    std::copy(sel.indices.begin(), sel.indices.end(), idx_in.data<int32_t>());
    std::copy(sel.values.begin(), sel.values.end(), val_in.f32());
    lap.to(st.pack_ms);
    if (total > 0) {
      comm.allgatherv(idx_in, idx_all, counts);
      comm.allgatherv(val_in, val_all, counts);
    }
    lap.to(st.comm_ms);
    st.bytes_sent = 8 + 8 * st.local_count;
  }
  // Scatter-add into the bucket, or into the coefficient domain of a transform method.
  const int64_t dn = transform ? sp.domain_size(ctx, n) : n;
  float* acc = g;
  if (transform) {
    s.domain.assign(dn, 0.0f);
    acc = s.domain.data();
  } else {
    std::fill(g, g + n, 0.0f);
  }
  const int32_t* ia = idx_all.data<int32_t>();
  const float* va = val_all.f32();
  s.result.clear();
  for (int64_t j = 0; j < total; ++j) {
    const int32_t i = ia[j];
    ST_CHECK(i >= 0 && i < dn, sp.name(), ": received index ", i, " outside 0..", dn);
    acc[i] += va[j];
    if (!s.marker[i]) {
      s.marker[i] = 1;
      s.result.push_back(i);
    }
  }
  const float inv = 1.0f / static_cast<float>(P);
  for (int32_t i : s.result) s.marker[i] = 0;
  if (transform) {
    sp.decode(ctx, acc, n, g);
    for (int64_t i = 0; i < n; ++i) g[i] *= inv;
    lap.to(st.decode_ms);
    // The rank's own contribution, decoded the same way, leaves the residual.
    std::fill(acc, acc + dn, 0.0f);
    for (size_t j = 0; j < sel.indices.size(); ++j) acc[sel.indices[j]] += sel.values[j];
    s.values.resize(n);
    sp.decode(ctx, acc, n, s.values.data());
    for (int64_t i = 0; i < n; ++i) x[i] -= s.values[i];
  } else {
    for (int32_t i : s.result) g[i] *= inv;
    lap.to(st.decode_ms);
    for (size_t j = 0; j < sel.indices.size(); ++j) x[sel.indices[j]] -= sel.values[j];
  }
  lap.to(st.update_ms);
  st.global_count = static_cast<int64_t>(s.result.size());
  std::vector<int64_t> offsets(P + 1, 0);
  for (int r = 0; r < P; ++r) offsets[r + 1] = offsets[r] + counts[r];
  feed_back(s, ctx, n, st.global_count, counts,
            [&](int r) { return std::make_pair(ia + offsets[r], counts[r]); });
}

// Shared indices (Random-k) or the leader's indices (CLT-k): every rank allreduces x at
// the same positions, so no index gathering is needed beyond the leader's broadcast.
void SparsifyHook::exchange_indices(BucketState& s, const SelectContext& ctx, float* x, float* g,
                                    int64_t n, Communicator& comm, SparsifyStats& st) {
  const int P = comm.size();
  std::vector<int32_t>& idx = s.result;
  int64_t idx_bytes = 0;
  const bool leader_pattern = sparsifier_->pattern() == ExchangePattern::LeaderIndices;
  const int leader = static_cast<int>(ctx.iteration % P);
  Laps lap;
  if (leader_pattern) {
    Tensor count = Tensor::zeros({1}, DType::I64);
    count.data<int64_t>()[0] = static_cast<int64_t>(s.selection.indices.size());
    lap.to(st.pack_ms);
    comm.broadcast(count, leader);
    lap.to(st.comm_ms);
    const int64_t c = count.data<int64_t>()[0];
    Tensor ids = Tensor::empty({c}, DType::I32);
    if (ctx.rank == leader)
      std::copy(s.selection.indices.begin(), s.selection.indices.end(), ids.data<int32_t>());
    lap.to(st.pack_ms);
    if (c > 0) comm.broadcast(ids, leader);
    lap.to(st.comm_ms);
    idx.assign(ids.data<int32_t>(), ids.data<int32_t>() + c);
    idx_bytes = ctx.rank == leader ? 8 + 4 * c : 0;
  } else {
    idx = s.selection.indices;
  }
  const int64_t u = static_cast<int64_t>(idx.size());
  Tensor vals = Tensor::empty({u});
  float* v = vals.f32();
  for (int64_t j = 0; j < u; ++j) v[j] = x[idx[j]];
  lap.to(st.pack_ms);
  comm.allreduce(vals);
  lap.to(st.comm_ms);
  std::fill(g, g + n, 0.0f);
  const float inv = 1.0f / static_cast<float>(P);
  for (int64_t j = 0; j < u; ++j) g[idx[j]] = v[j] * inv;
  lap.to(st.decode_ms);
  for (int64_t j = 0; j < u; ++j) x[idx[j]] = 0.0f;
  lap.to(st.update_ms);
  st.global_count = u;
  st.bytes_sent = idx_bytes + 4 * u;
  std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  lap.to(st.comm_ms);
  feed_back(s, ctx, n, u, counts, [&](int r) {
    const bool sent = !leader_pattern || r == leader;
    return std::make_pair(idx.data(), sent ? u : int64_t{0});
  });
}

// Low-rank (PowerSGD): select() gave the first message; its sum over the ranks yields
// the second one (second_message), whose sum decode() turns into the update. The
// residual is x - decode(own second message): linear, so the ranks' contributions add
// up to P times the update exactly.
void SparsifyHook::exchange_low_rank(BucketState& s, const SelectContext& ctx, float* x, float* g,
                                     int64_t n, Communicator& comm, SparsifyStats& st) {
  Sparsifier& sp = *sparsifier_;
  const int P = comm.size();
  Laps lap;
  const std::vector<float>& first = s.selection.values;
  Tensor m1 = Tensor::from_vector(first, {static_cast<int64_t>(first.size())});
  lap.to(st.pack_ms);
  if (m1.numel() > 0) comm.allreduce(m1);
  lap.to(st.comm_ms);
  std::vector<float> own;
  sp.second_message(ctx, x, n, m1.f32(), own);
  Tensor m2 = Tensor::from_vector(own, {static_cast<int64_t>(own.size())});
  lap.to(st.pack_ms);
  if (m2.numel() > 0) comm.allreduce(m2);
  lap.to(st.comm_ms);
  sp.decode(ctx, m2.f32(), n, g);
  const float inv = 1.0f / static_cast<float>(P);
  for (int64_t i = 0; i < n; ++i) g[i] *= inv;
  lap.to(st.decode_ms);
  s.values.resize(n);
  sp.decode(ctx, own.data(), n, s.values.data());
  for (int64_t i = 0; i < n; ++i) x[i] -= s.values[i];
  lap.to(st.update_ms);
  s.result.clear();
  const int64_t floats = m1.numel() + m2.numel();
  st.local_count = st.global_count = floats;
  st.bytes_sent = 4 * floats;
  ExchangeFeedback fb{ctx.bucket, ctx.iteration, n, ctx.k, floats, std::vector<int64_t>(P, floats)};
  fb.summed = m2.f32();
  fb.summed_size = m2.numel();
  sp.observe(fb);
}

}  // namespace st
