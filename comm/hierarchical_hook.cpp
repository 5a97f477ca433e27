#include "comm/hierarchical_hook.h"

#include <unistd.h>

#include <bit>
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
    counts[static_cast<size_t>(l)] = n * (l + 1) / parts - n * l / parts;
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
  slice.offset = bucket.offset + bucket.numel * l / layout_.local_size;
  slice.numel = counts[static_cast<size_t>(l)];
  return slice;  // no parameters: a slice may cut through one
}

std::vector<Bucket> HierarchicalHook::slices_of(const std::vector<Bucket>& buckets) const {
  std::vector<Bucket> out;
  for (const Bucket& b : buckets) out.push_back(slice_of(b));
  return out;
}

void HierarchicalHook::exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                                int64_t iteration) {
  ST_CHECK(comm.size() == world_size_, "HierarchicalHook: built for ", world_size_,
           " ranks, exchanging over ", comm.size());
  if (!two_level()) {
    inner_->exchange(bucket, grads, comm, iteration);
    return;
  }
  const std::vector<int64_t> counts = slice_counts(bucket.numel, layout_.local_size);
  const Bucket slice = slice_of(bucket);
  Tensor& part = part_[bucket.id];
  if (!part.defined() || part.numel() != slice.numel || part.device() != grads.device())
    part = Tensor::empty({slice.numel}, DType::F32, grads.device());
  node_->reduce_scatter(grads, part, counts);
  // The node's mean: the wrapped hook then averages over nodes, which makes the mean over
  // all N L ranks, and its error feedback keeps the scale a flat exchange's residual has.
  if (layout_.local_size > 1) scale_inplace(part, 1.0f / static_cast<float>(layout_.local_size));
  inner_->exchange(slice, part, *cross_, iteration);
  if (grads.device().is_cpu())
    allgather_slices(part, grads, counts);
  else  // a GPU node's fast link (NVLink) makes the dense allgather cheap
    node_->allgatherv(part, grads, counts);
  synchronize_current_stream(grads.device());
}

void HierarchicalHook::allgather_slices(const Tensor& part, Tensor& grads,
                                        const std::vector<int64_t>& counts) {
  // Nonzeros by their bits, so a -0.0 travels as the dense path would carry it.
  const float* x = part.data<float>();
  std::vector<int32_t> pairs;  // position, value bits, position, value bits, ...
  for (int64_t i = 0; i < part.numel(); ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(x[i]);
    if (bits == 0) continue;
    pairs.push_back(static_cast<int32_t>(i));
    pairs.push_back(std::bit_cast<int32_t>(bits));
  }
  Tensor mine = Tensor::empty({1}, DType::I64);
  mine.data<int64_t>()[0] = static_cast<int64_t>(pairs.size());
  Tensor sizes = Tensor::empty({layout_.local_size}, DType::I64);
  node_->allgather(mine, sizes);
  std::vector<int64_t> pair_counts(sizes.data<int64_t>(), sizes.data<int64_t>() + sizes.numel());
  int64_t total = 0, dense = 0;
  for (size_t l = 0; l < counts.size(); ++l) {
    total += pair_counts[l];
    dense += counts[l];
  }
  // Two 32-bit words per entry against one per element.
  if (total >= dense) {
    node_->allgatherv(part, grads, counts);
    return;
  }
  Tensor packed = Tensor::from_vector_i32(pairs, {static_cast<int64_t>(pairs.size())});
  Tensor gathered = Tensor::empty({total}, DType::I32);
  node_->allgatherv(packed, gathered, pair_counts);
  float* out = grads.data<float>();
  std::memset(out, 0, static_cast<size_t>(dense) * sizeof(float));
  const int32_t* in = gathered.data<int32_t>();
  int64_t start = 0;  // slice l's first element in the bucket
  for (size_t l = 0; l < counts.size(); ++l) {
    for (int64_t j = 0; j < pair_counts[l]; j += 2, in += 2)
      out[start + in[0]] = std::bit_cast<float>(in[1]);
    start += counts[l];
  }
}

}  // namespace st
