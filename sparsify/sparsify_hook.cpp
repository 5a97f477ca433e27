#include "sparsify/sparsify_hook.h"

#include <algorithm>
#include <cmath>

#include "core/ops.h"
#include "core/timer.h"

namespace st {

namespace {

// Allgathers one int64 per rank.
std::vector<int64_t> allgather_counts(Communicator& comm, int64_t mine) {
  Tensor in = Tensor::zeros({1}, DType::I64), out = Tensor::zeros({comm.size()}, DType::I64);
  in.data<int64_t>()[0] = mine;
  comm.allgather(in, out);
  const int64_t* p = out.data<int64_t>();
  return std::vector<int64_t>(p, p + comm.size());
}

double padding_overhead(const std::vector<int64_t>& counts) {
  int64_t mx = 0, sum = 0;
  for (int64_t c : counts) {
    mx = std::max(mx, c);
    sum += c;
  }
  return sum > 0 ? static_cast<double>(mx) * counts.size() / sum - 1.0 : 0.0;
}

}  // namespace

SparsifyHook::SparsifyHook(SparsifierPtr sparsifier, SparsifierOptions options,
                           int64_t dense_warmup_iters)
    : sparsifier_(std::move(sparsifier)),
      opt_(std::move(options)),
      dense_warmup_(dense_warmup_iters) {
  ST_CHECK(sparsifier_ != nullptr, "SparsifyHook: no sparsifier");
  ST_CHECK(opt_.density > 0 && opt_.density <= 1, "--density must be in (0, 1], got ",
           opt_.density);
  ST_CHECK(dense_warmup_ >= 0, "--dense-warmup-iters must be >= 0, got ", dense_warmup_);
}

std::string SparsifyHook::name() const {
  return sparsifier_->name();
}

Tensor SparsifyHook::residual(int bucket) const {
  auto it = state_.find(bucket);
  return it == state_.end() ? Tensor() : it->second.residual;
}

std::vector<SparsifyStats> SparsifyHook::take_stats() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  std::vector<SparsifyStats> out;
  out.swap(stats_);
  return out;
}

void SparsifyHook::exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                            int64_t iteration) {
  ST_CHECK(grads.device().is_cpu(), "--sparsifier ", sparsifier_->name(),
           ": the sparsified exchange runs on CPU gradients; got ", grads.str());
  const int64_t n = bucket.numel;
  const int P = comm.size();
  SparsifyStats st;
  st.iteration = iteration;
  st.bucket = bucket.id;
  st.n = n;
  if (iteration < dense_warmup_) {
    // Dense warm-up: a plain average; the residual is untouched (still zero).
    Timer t;
    comm.allreduce(grads);
    scale_inplace(grads, 1.0f / static_cast<float>(P));
    st.exchange_ms = t.ms();
    st.local_count = st.global_count = st.k = n;
    st.actual_density = 1.0;
    st.bytes_sent = n * 4;
    st.dense = true;
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.push_back(st);
    return;
  }
  BucketState& s = state_[bucket.id];
  if (!s.residual.defined()) {
    s.residual = Tensor::zeros({n});
    s.marker.assign(n, 0);
  }
  // Error feedback: x = grad + residual, kept in the residual buffer.
  float* x = s.residual.f32();
  float* g = grads.f32();
#pragma omp parallel for simd if (n > 65536) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] += g[i];

  SelectContext ctx;
  ctx.bucket = bucket.id;
  ctx.iteration = iteration - dense_warmup_;
  ctx.rank = comm.rank();
  ctx.world = P;
  ctx.density = opt_.density;
  ctx.k =
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(opt_.density * static_cast<double>(n))));
  ctx.seed = opt_.seed;
  st.k = ctx.k;
  Timer t;
  s.selection.clear();
  sparsifier_->select(ctx, x, n, s.selection);
  st.select_ms = t.ms();
  st.threshold = s.selection.threshold;
  st.local_count = static_cast<int64_t>(s.selection.indices.size());
  for (int32_t i : s.selection.indices)
    ST_CHECK(i >= 0 && i < n, sparsifier_->name(), ": selected index ", i, " outside bucket ",
             bucket.id, " of ", n, " elements");
  t.reset();
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
    case ExchangePattern::Dense: {
      std::copy(x, x + n, g);
      comm.allreduce(grads);
      scale_inplace(grads, 1.0f / static_cast<float>(P));
      std::fill(x, x + n, 0.0f);
      s.result.clear();
      st.global_count = n;
      st.bytes_sent = n * 4;
      break;
    }
  }
  st.exchange_ms = t.ms();
  st.actual_density = static_cast<double>(st.global_count) / static_cast<double>(n);
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.push_back(st);
}

// Union-allreduce (kljp family): allgather counts, allgather indices padded to max k_i,
// union in rank order (identical on every rank), allreduce x at the union, divide by P.
void SparsifyHook::exchange_union(BucketState& s, const SelectContext& ctx, float* x, float* g,
                                  int64_t n, Communicator& comm, SparsifyStats& st) {
  const int P = comm.size();
  const std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  const int64_t maxk = *std::max_element(counts.begin(), counts.end());
  st.padding_overhead = padding_overhead(counts);
  Tensor mine = Tensor::empty({maxk}, DType::I32), all = Tensor::empty({maxk * P}, DType::I32);
  int32_t* m = mine.data<int32_t>();
  std::copy(s.selection.indices.begin(), s.selection.indices.end(), m);
  std::fill(m + st.local_count, m + maxk, -1);
  if (maxk > 0) comm.allgather(mine, all);
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
  const int64_t u = static_cast<int64_t>(s.result.size());
  Tensor vals = Tensor::empty({u});
  float* v = vals.f32();
  for (int64_t j = 0; j < u; ++j) v[j] = x[s.result[j]];
  comm.allreduce(vals);
  std::fill(g, g + n, 0.0f);
  const float inv = 1.0f / static_cast<float>(P);
  for (int64_t j = 0; j < u; ++j) {
    const int32_t i = s.result[j];
    g[i] = v[j] * inv;
    x[i] = 0.0f;  // every rank transmitted x at every union position
    s.marker[i] = 0;
  }
  st.global_count = u;
  st.bytes_sent = 8 + 4 * maxk + 4 * u;
  sparsifier_->observe({ctx.bucket, ctx.iteration, n, ctx.k, u, counts});
}

// Allgather-sum (GRACE family): allgatherv (index, value) pairs, scatter-add, divide by
// P. A rank contributed only its own (possibly quantised) values, so its residual keeps
// x - value at its own positions.
void SparsifyHook::exchange_allgather(BucketState& s, const SelectContext& ctx, float* x, float* g,
                                      int64_t n, Communicator& comm, SparsifyStats& st) {
  const int P = comm.size();
  Selection& sel = s.selection;
  if (sel.values.size() != sel.indices.size()) {
    sel.values.resize(sel.indices.size());
    for (size_t j = 0; j < sel.indices.size(); ++j) sel.values[j] = x[sel.indices[j]];
  }
  const std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  st.padding_overhead = padding_overhead(counts);
  Tensor idx_in = Tensor::empty({st.local_count}, DType::I32),
         idx_all = Tensor::empty({total}, DType::I32);
  Tensor val_in = Tensor::empty({st.local_count}), val_all = Tensor::empty({total});
  std::copy(sel.indices.begin(), sel.indices.end(), idx_in.data<int32_t>());
  std::copy(sel.values.begin(), sel.values.end(), val_in.f32());
  if (total > 0) {
    comm.allgatherv(idx_in, idx_all, counts);
    comm.allgatherv(val_in, val_all, counts);
  }
  std::fill(g, g + n, 0.0f);
  const int32_t* ia = idx_all.data<int32_t>();
  const float* va = val_all.f32();
  s.result.clear();
  for (int64_t j = 0; j < total; ++j) {
    const int32_t i = ia[j];
    g[i] += va[j];
    if (!s.marker[i]) {
      s.marker[i] = 1;
      s.result.push_back(i);
    }
  }
  const float inv = 1.0f / static_cast<float>(P);
  for (int32_t i : s.result) {
    g[i] *= inv;
    s.marker[i] = 0;
  }
  for (size_t j = 0; j < sel.indices.size(); ++j) x[sel.indices[j]] -= sel.values[j];
  st.global_count = static_cast<int64_t>(s.result.size());
  st.bytes_sent = 8 + 8 * st.local_count;
  sparsifier_->observe({ctx.bucket, ctx.iteration, n, ctx.k, st.global_count, counts});
}

// Shared indices (Random-k) or the leader's indices (CLT-k): every rank allreduces x at
// the same positions, so no index gathering is needed beyond the leader's broadcast.
void SparsifyHook::exchange_indices(BucketState& s, const SelectContext& ctx, float* x, float* g,
                                    int64_t n, Communicator& comm, SparsifyStats& st) {
  const int P = comm.size();
  std::vector<int32_t>& idx = s.result;
  int64_t idx_bytes = 0;
  if (sparsifier_->pattern() == ExchangePattern::LeaderIndices) {
    const int leader = static_cast<int>(ctx.iteration % P);
    Tensor count = Tensor::zeros({1}, DType::I64);
    count.data<int64_t>()[0] = static_cast<int64_t>(s.selection.indices.size());
    comm.broadcast(count, leader);
    const int64_t c = count.data<int64_t>()[0];
    Tensor ids = Tensor::empty({c}, DType::I32);
    if (ctx.rank == leader)
      std::copy(s.selection.indices.begin(), s.selection.indices.end(), ids.data<int32_t>());
    if (c > 0) comm.broadcast(ids, leader);
    idx.assign(ids.data<int32_t>(), ids.data<int32_t>() + c);
    idx_bytes = ctx.rank == leader ? 8 + 4 * c : 0;
  } else {
    idx = s.selection.indices;
  }
  const int64_t u = static_cast<int64_t>(idx.size());
  Tensor vals = Tensor::empty({u});
  float* v = vals.f32();
  for (int64_t j = 0; j < u; ++j) v[j] = x[idx[j]];
  comm.allreduce(vals);
  std::fill(g, g + n, 0.0f);
  const float inv = 1.0f / static_cast<float>(P);
  for (int64_t j = 0; j < u; ++j) {
    g[idx[j]] = v[j] * inv;
    x[idx[j]] = 0.0f;
  }
  st.global_count = u;
  st.bytes_sent = idx_bytes + 4 * u;
  std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  sparsifier_->observe({ctx.bucket, ctx.iteration, n, ctx.k, u, counts});
}

}  // namespace st
