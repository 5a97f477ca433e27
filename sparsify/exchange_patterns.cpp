// SparsifyHook's exchange patterns (docs/ALGORITHMS.md, "Exchange patterns"): how a
// selection travels between the ranks and becomes the averaged bucket and the residual.
// Each pattern says which phase it is in (phase(), one line per phase boundary); the
// timing decorator around the hook's bulk::Ops times the collectives (bulk/timing_ops.h
// gives the attribution rule). Counts and bytes are the pattern's own facts.
#include <algorithm>
#include <climits>

#include "sparsify/sparsify_hook.h"

namespace st {

namespace {

using bulk::Elem;
using bulk::Ops;
using bulk::Phase;

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

std::vector<int64_t> prefix_offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> off(counts.size() + 1, 0);
  for (size_t r = 0; r < counts.size(); ++r) off[r + 1] = off[r] + counts[r];
  return off;
}

}  // namespace

// The counts' upload and download belong to the collective: the whole call is comm.
std::vector<int64_t> SparsifyHook::allgather_counts(Communicator& comm, int64_t mine) {
  ST_CHECK(mine <= INT32_MAX, "--sparsifier ", sparsifier_->name(), ": a message of ", mine,
           " entries is beyond int32 positions");
  const bulk::PhaseScope in_comm(clock_, Phase::Comm);
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

// Dense: the whole x travels, so the residual becomes zero.
void SparsifyHook::exchange_dense(BucketState& s, Bufs b, Communicator& comm, SparsifyStats& st) {
  Ops& ops = *ops_;
  phase(Phase::Pack);
  ops.copy(b.x, 0, b.g, 0, b.n);
  ops.allreduce_sum(comm, b.g);
  phase(Phase::Decode);
  ops.scale(b.g, {0, b.n}, 1.0f / static_cast<float>(comm.size()));
  phase(Phase::Update);
  ops.fill(b.x, {0, b.n}, 0.0f);
  phase(Phase::Other);
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
  const std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  phase(Phase::Pack);
  const int64_t maxk = *std::max_element(counts.begin(), counts.end());
  account_padding(counts, st);
  // The slots past a rank's count are never read (the counts bound every rank's part).
  ops.resize(s.mine, Elem::I32, maxk);
  ops.copy(s.selection.indices, 0, s.mine, 0, st.local_count);
  ops.allgather(comm, s.mine, s.idx_all);
  phase(Phase::Decode);
  std::vector<int64_t> offsets(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) offsets[r] = r * maxk;
  ops.union_of(s.idx_all, offsets, counts, b.n, s.result);
  phase(Phase::Pack);
  const int64_t u = s.result.size();
  ops.gather(b.x, s.result, s.values);
  ops.allreduce_sum(comm, s.values);
  phase(Phase::Decode);
  ops.fill(b.g, {0, b.n}, 0.0f);
  ops.scatter_scaled(s.result, s.values, 1.0f / static_cast<float>(P), b.g);
  phase(Phase::Update);
  ops.zero_at(s.result, b.x);  // every rank transmitted x at every union position
  phase(Phase::Other);
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
  Sparsifier& sp = *sparsifier_;
  DeviceSelection& sel = s.selection;
  const bool transform = sp.transform_domain();
  phase(Phase::Pack);
  if (sel.values.size() != sel.indices.size()) {
    ST_CHECK(!transform && !sp.packs(), sp.name(), ": select_on() gave ", sel.indices.size(),
             " indices but ", sel.values.size(), " values");
    ops.gather(b.x, sel.indices, sel.values);
  }
  const std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
  account_padding(counts, st);
  if (sp.packs()) {
    gather_packed(s, ctx, b.n, counts, comm, st);
  } else {
    ops.allgatherv(comm, sel.indices, counts, s.idx_all);
    ops.allgatherv(comm, sel.values, counts, s.val_all);
    st.bytes_sent = 8 + 8 * st.local_count;
  }
  phase(Phase::Decode);
  // Scatter-add into the bucket, or into the coefficient domain of a transform method.
  const int64_t dn = transform ? sp.domain_size(ctx, b.n) : b.n;
  bulk::Buffer& acc = transform ? s.domain : b.g;
  if (transform) ops.resize(s.domain, Elem::F32, dn);
  ops.fill(acc, {0, dn}, 0.0f);
  check_positions(s.idx_all, dn, "received", ctx.bucket);
  ops.scatter_add(s.idx_all, s.val_all, acc);
  const std::vector<int64_t> offsets = prefix_offsets(counts);
  ops.union_of(s.idx_all, offsets, counts, dn, s.result);
  const float inv = 1.0f / static_cast<float>(comm.size());
  if (transform) {
    sp.decode_on(ops, ctx, s.domain, b.n, b.g);
    ops.scale(b.g, {0, b.n}, inv);
    phase(Phase::Update);
    // The rank's own contribution, decoded the same way, leaves the residual.
    ops.fill(s.domain, {0, dn}, 0.0f);
    ops.scatter_add(sel.indices, sel.values, s.domain);
    sp.decode_on(ops, ctx, s.domain, b.n, s.tmp);
    ops.axpy(-1.0f, s.tmp, {0, b.n}, b.x);
  } else {
    ops.gather(b.g, s.result, s.tmp);
    ops.scatter_scaled(s.result, s.tmp, inv, b.g);
    phase(Phase::Update);
    ops.scatter_axpy(-1.0f, sel.indices, sel.values, b.x);
  }
  phase(Phase::Other);
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
  bulk::QuantOps& quant = bulk::need<bulk::QuantOps>(ops, sp.name());  // same_bits
  const DeviceSelection& sel = s.selection;
  const int64_t mine = sel.packed.size();
  const std::vector<int64_t> words = allgather_counts(comm, mine);
  ops.allgatherv(comm, sel.packed, words, s.words_all);
  phase(Phase::Decode);
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
      ST_CHECK(quant.same_bits(one.indices, sel.indices) && quant.same_bits(one.values, sel.values),
               sp.name(), ": unpack(packed) differs from the selection on rank ", r);
    ops.copy(one.indices, 0, s.idx_all, at[r], counts[r]);
    ops.copy(one.values, 0, s.val_all, at[r], counts[r]);
  }
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
  phase(Phase::Pack);
  if (leader_pattern) {
    const auto mine = static_cast<int32_t>(s.selection.indices.size());
    ops.upload(&mine, Elem::I32, 1, count_in_);
    ops.broadcast(comm, count_in_, leader);
    int32_t c = 0;
    ops.download(count_in_, 0, 1, &c);
    ops.resize(idx, Elem::I32, c);
    if (ctx.rank == leader) ops.copy(s.selection.indices, 0, idx, 0, c);
    ops.broadcast(comm, idx, leader);
    idx_bytes = ctx.rank == leader ? 8 + 4 * int64_t{c} : 0;
  } else {
    ops.resize(idx, Elem::I32, s.selection.indices.size());
    ops.copy(s.selection.indices, 0, idx, 0, idx.size());
  }
  const int64_t u = idx.size();
  ops.gather(b.x, idx, s.values);
  ops.allreduce_sum(comm, s.values);
  phase(Phase::Decode);
  ops.fill(b.g, {0, b.n}, 0.0f);
  ops.scatter_scaled(idx, s.values, 1.0f / static_cast<float>(P), b.g);
  phase(Phase::Update);
  ops.zero_at(idx, b.x);
  phase(Phase::Other);
  st.global_count = u;
  st.bytes_sent = idx_bytes + 4 * u;
  std::vector<int64_t> counts = allgather_counts(comm, st.local_count);
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
  phase(Phase::Pack);
  const bulk::Buffer& first = s.selection.values;
  ops.resize(s.m1, Elem::F32, first.size());
  ops.copy(first, 0, s.m1, 0, first.size());
  ops.allreduce_sum(comm, s.m1);
  sp.second_message_on(ops, ctx, b.x, s.m1, s.tmp);  // this rank's second message
  ops.resize(s.m2, Elem::F32, s.tmp.size());
  ops.copy(s.tmp, 0, s.m2, 0, s.tmp.size());
  ops.allreduce_sum(comm, s.m2);
  phase(Phase::Decode);
  sp.decode_on(ops, ctx, s.m2, b.n, b.g);
  ops.scale(b.g, {0, b.n}, 1.0f / static_cast<float>(P));
  phase(Phase::Update);
  sp.decode_on(ops, ctx, s.tmp, b.n, s.values);
  ops.axpy(-1.0f, s.values, {0, b.n}, b.x);
  phase(Phase::Other);
  ops.resize(s.result, Elem::I32, 0);
  const int64_t floats = s.m1.size() + s.m2.size();
  st.local_count = st.global_count = floats;
  st.bytes_sent = 4 * floats;
  ExchangeFeedback fb{ctx.bucket, ctx.iteration, b.n,
                      ctx.k,      floats,        std::vector<int64_t>(P, floats)};
  fb.summed_buffer = &s.m2;
  fb.summed_size = s.m2.size();
  sp.observe(fb);
}

}  // namespace st
