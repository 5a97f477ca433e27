// SparsifyHook in tensor scope (--sp scope=tensor): the bucket's tensors found from its
// parameters' gradient views, one selection per tensor, and each tensor's feedback.
#include <algorithm>
#include <cmath>

#include "sparsify/sparsify_hook.h"

namespace st {

using bulk::Elem;
using bulk::Ops;

// Start offsets of the bucket's tensors (its parameters' gradient views inside `grads`),
// ascending, and each one's first dimension; empty when the bucket carries no parameters
// (tests, benchmarks). Only addresses are compared: no gradient memory is read.
void SparsifyHook::tensor_segments(const Bucket& bucket, const Tensor& grads, SelectContext& ctx) {
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
  bulk::ScopeOps& scope = bulk::need<bulk::ScopeOps>(ops, sparsifier_->name());
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
    u.k = kept_count(ctx.density, len);
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
    scope.offset_indices(one.indices, static_cast<int32_t>(u.begin));
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
  bulk::ScopeOps& scope = bulk::need<bulk::ScopeOps>(*ops_, sparsifier_->name());
  const size_t S = s.units.size();
  const std::vector<int64_t> result_counts =
      scope.segment_counts(s.result, 0, s.result.size(), ctx.segments);
  std::vector<std::vector<int64_t>> per_rank(S, std::vector<int64_t>(counts.size(), 0));
  for (size_t r = 0; r < counts.size(); ++r) {
    const RankSlice q = rank_indices(static_cast<int>(r));
    const std::vector<int64_t> one = scope.segment_counts(*q.idx, q.begin, q.count, ctx.segments);
    for (size_t j = 0; j < S; ++j) per_rank[j][r] = one[j];
  }
  for (size_t j = 0; j < S; ++j) {
    const Unit& u = s.units[j];
    if (u.dense) continue;
    sparsifier_->observe(
        {u.id, ctx.iteration, u.end - u.begin, u.k, result_counts[j], per_rank[j]});
  }
}

}  // namespace st
