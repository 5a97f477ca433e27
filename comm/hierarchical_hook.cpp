#include "comm/hierarchical_hook.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/ops.h"
#include "core/stream_sync.h"

namespace st {

std::string NodeLayout::describe() const {
  return std::to_string(nodes) + (nodes == 1 ? " node x " : " nodes x ") +
         std::to_string(local_size) + (local_size == 1 ? " rank" : " ranks");
}

namespace {
// Every rank's node key: a hash of its host name, or its rank / ranks_per_node.
std::vector<int64_t> node_keys(Communicator& world, int ranks_per_node) {
  const int p = world.size();
  std::vector<int64_t> keys(static_cast<size_t>(p));
  if (ranks_per_node > 0) {
    for (int r = 0; r < p; ++r) keys[static_cast<size_t>(r)] = r / ranks_per_node;
    return keys;
  }
  char host[256] = {};
  ST_CHECK(gethostname(host, sizeof host - 1) == 0, "--hierarchy node: cannot read the host name");
  Tensor mine = Tensor::empty({1}, DType::I64);
  mine.data<int64_t>()[0] = static_cast<int64_t>(std::hash<std::string>{}(host) >> 1);
  Tensor all = Tensor::empty({p}, DType::I64);
  world.allgather(mine, all);
  for (int r = 0; r < p; ++r) keys[static_cast<size_t>(r)] = all.data<int64_t>()[r];
  return keys;
}
}  // namespace

NodeLayout find_node_layout(Communicator& world, int ranks_per_node) {
  const int p = world.size();
  ST_CHECK(ranks_per_node >= 0 && ranks_per_node <= p, "--hierarchy ", ranks_per_node,
           ": a node cannot hold more than the run's ", p, " ranks");
  ST_CHECK(ranks_per_node == 0 || p % ranks_per_node == 0, "--hierarchy ", ranks_per_node, ": the ",
           p, " ranks do not fill nodes of ", ranks_per_node, " ranks");
  const std::vector<int64_t> keys = node_keys(world, ranks_per_node);
  // Nodes numbered in the order of their first rank; sizes counted.
  std::vector<int64_t> seen;
  std::vector<int> sizes;
  NodeLayout layout;
  for (int r = 0; r < p; ++r) {
    size_t node = 0;
    while (node < seen.size() && seen[node] != keys[static_cast<size_t>(r)]) ++node;
    if (node == seen.size()) {
      seen.push_back(keys[static_cast<size_t>(r)]);
      sizes.push_back(0);
    }
    if (r == world.rank()) {
      layout.node = static_cast<int>(node);
      layout.local_rank = sizes[node];
    }
    ++sizes[node];
  }
  for (size_t node = 1; node < sizes.size(); ++node)
    ST_CHECK(sizes[node] == sizes[0],
             "--hierarchy: every node needs the same number of ranks, but ",
             "node 0 (rank 0's) has ", sizes[0], " and node ", node, " has ", sizes[node]);
  layout.nodes = static_cast<int>(sizes.size());
  layout.local_size = sizes[0];
  return layout;
}

std::vector<int64_t> slice_counts(int64_t n, int parts) {
  std::vector<int64_t> counts(static_cast<size_t>(parts));
  for (int l = 0; l < parts; ++l)
    counts[static_cast<size_t>(l)] = slice_start(n, l + 1, parts) - slice_start(n, l, parts);
  return counts;
}

HierarchicalHook::HierarchicalHook(std::shared_ptr<BucketHook> inner, Communicator& world,
                                   NodeLayout layout)
    : inner_(std::move(inner)), layout_(layout), world_size_(world.size()) {
  ST_CHECK(inner_ != nullptr, "HierarchicalHook: no hook to wrap");
  ST_CHECK(layout_.nodes * layout_.local_size == world_size_, "--hierarchy: ", layout_.describe(),
           " do not make the run's ", world_size_, " ranks");
  if (!two_level()) return;
  node_ = world.split(layout_.node, layout_.local_rank);
  cross_ = world.split(layout_.local_rank, layout_.node);
}

Bucket HierarchicalHook::slice_of(const Bucket& bucket) const {
  if (!two_level()) return bucket;
  const std::vector<int64_t> counts = slice_counts(bucket.numel, layout_.local_size);
  const int l = layout_.local_rank;
  Bucket slice;
  slice.id = bucket.id;
  slice.offset = bucket.offset + slice_start(bucket.numel, l, layout_.local_size);
  slice.numel = counts[static_cast<size_t>(l)];
  return slice;  // no parameters: a slice may cut through one
}

std::vector<Bucket> HierarchicalHook::slices_of(const std::vector<Bucket>& buckets) const {
  std::vector<Bucket> out;
  for (const Bucket& b : buckets) out.push_back(slice_of(b));
  return out;
}

// Each rank's segment has two regions of region_ floats (the largest bucket so far): its
// bucket as the peers read it, then its averaged slice. Every step reads only after a
// fence that follows the writes it reads, and a rank overwrites a region only after a
// fence that every reader of the region's last contents has passed: a bucket needs two
// fences, as long as the regions stay put from bucket to bucket (a bucket's slice must
// not land where a peer may still read the previous bucket's slices).
//
// Each step moves only what another rank reads (on 4 ranks sharing 2 cores the copies
// come out of compute): a rank publishes the bucket without its own slice, sums its slice
// in place in its gradients, scaled in the same pass, publishes the averaged slice, and
// gathers only the others' slices. With two ranks a node, a rank reads 2.5 n floats and
// writes 2 n a bucket of n, where copying the whole bucket in and out read 4 n and wrote
// 3.5 n.
void HierarchicalHook::reduce_scatter_shared(SharedSegments& shared, Tensor& grads, Tensor& part) {
  const int me = layout_.local_rank, L = layout_.local_size;
  const int64_t n = grads.numel();
  region_ = std::max(region_, n);
  shared.reserve(2 * region_);  // growing it fences and starts afresh
  const int64_t begin = slice_start(n, me, L), end = slice_start(n, me + 1, L);
  const float* g = grads.data<float>();
  float* published = shared.segment(me);
  std::memcpy(published, g, static_cast<size_t>(begin) * sizeof(float));
  std::memcpy(published + end, g + end, static_cast<size_t>(n - end) * sizeof(float));
  shared.fence();
  // In rank order, as the communicators' reduce-scatter sums, then scaled by 1 / L as
  // the collectives' path scales: the same bits. The own term comes from `grads`.
  std::vector<const float*> terms(static_cast<size_t>(L));
  for (int r = 0; r < L; ++r)
    terms[static_cast<size_t>(r)] = (r == me ? g : shared.segment(r)) + begin;
  const float inv = 1.0f / static_cast<float>(L);
  float* out = part.data<float>();  // grads' own slice: each element read before written
  const int64_t mine = end - begin;
  // In blocks that stay in L1, each loop over one term vectorises.
  constexpr int64_t kBlock = 1024;
  float sum[kBlock];
  for (int64_t b = 0; b < mine; b += kBlock) {
    const int64_t m = std::min(kBlock, mine - b);
    std::memcpy(sum, terms[0] + b, static_cast<size_t>(m) * sizeof(float));
    for (int r = 1; r < L; ++r) {
      const float* t = terms[static_cast<size_t>(r)] + b;
      for (int64_t i = 0; i < m; ++i) sum[i] += t[i];
    }
    for (int64_t i = 0; i < m; ++i) out[b + i] = sum[i] * inv;
  }
}

void HierarchicalHook::allgather_shared(SharedSegments& shared, const Tensor& part, Tensor& grads) {
  const int me = layout_.local_rank, L = layout_.local_size;
  const int64_t n = grads.numel();
  std::memcpy(shared.segment(me) + region_, part.data<float>(),
              static_cast<size_t>(part.numel()) * sizeof(float));
  shared.fence();
  float* out = grads.data<float>();  // its own slice is `part` already
  for (int r = 0; r < L; ++r) {
    if (r == me) continue;
    const int64_t begin = slice_start(n, r, L), count = slice_start(n, r + 1, L) - begin;
    std::memcpy(out + begin, shared.segment(r) + region_,
                static_cast<size_t>(count) * sizeof(float));
  }
}

void HierarchicalHook::exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                                int64_t iteration) {
  ST_CHECK(comm.size() == world_size_, "HierarchicalHook: built for ", world_size_,
           " ranks, exchanging over ", comm.size());
  if (!two_level()) {
    inner_->exchange(bucket, grads, comm, iteration);
    return;
  }
  ST_CHECK(grads.numel() == bucket.numel, "HierarchicalHook: bucket ", bucket.id, " has ",
           bucket.numel, " elements, its gradients ", grads.numel());
  const Bucket slice = slice_of(bucket);
  // Host memory of ranks on one host: through shared segments, the slice a view of the
  // gradients' own part. Device memory (and ranks that share none): the node group's
  // collectives into a tensor of its own.
  SharedSegments* shared = grads.device().is_cpu() ? node_->shared_segments() : nullptr;
  if (shared) {
    Tensor part = grads.slice_flat(slice.offset - bucket.offset, {slice.numel});
    reduce_scatter_shared(*shared, grads, part);
    // The node's mean is in `part`: the wrapped hook then averages over nodes, which
    // makes the mean over all N L ranks.
    inner_->exchange(slice, part, *cross_, iteration);
    allgather_shared(*shared, part, grads);
    return;
  }
  const std::vector<int64_t> counts = slice_counts(bucket.numel, layout_.local_size);
  Tensor& part = part_[bucket.id];
  if (!part.defined() || part.numel() != slice.numel || part.device() != grads.device())
    part = Tensor::empty({slice.numel}, DType::F32, grads.device());
  node_->reduce_scatter(grads, part, counts);
  // The node's mean: the wrapped hook then averages over nodes, which makes the mean over
  // all N L ranks, and its error feedback keeps the scale a flat exchange's residual has.
  if (layout_.local_size > 1) scale_inplace(part, 1.0f / static_cast<float>(layout_.local_size));
  inner_->exchange(slice, part, *cross_, iteration);
  node_->allgatherv(part, grads, counts);
  synchronize_current_stream(grads.device());
}

}  // namespace st
