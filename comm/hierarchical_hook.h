// The two-level exchange (--hierarchy, docs/ALGORITHMS.md "Two-level exchange"): a bucket
// hook around any other. A cluster joins a few GPUs per node by a fast link and the nodes by a
// slow one; a flat exchange sends every rank's message over the slow link. Here, for a node
// of L ranks and N nodes:
//   1. inside the node, a dense reduce-scatter over the fast link: local rank l owns slice l
//      of the bucket (L near-equal contiguous parts), summed over the node's ranks and
//      divided by L (the node's mean gradient);
//   2. across nodes, the wrapped hook (dense averaging or a sparsifier) exchanges slice l
//      among the N ranks of local rank l (one group per local rank, each on its own slice);
//      its error feedback lives with the slice, on the rank that selects it;
//   3. inside the node, an allgather of the averaged slices rebuilds the bucket.
// On the CPU, steps 1 and 3 go through memory the node's ranks share (comm/shared_segments.h)
// when they have it; device memory takes the node group's collectives.
// With one node nothing crosses a slow link: the wrapped hook runs flat over every rank.
// With one rank per node steps 1 and 3 are copies and the result is the flat exchange's.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/reducer.h"

namespace st {

// Where this rank sits in the two-level layout.
struct NodeLayout {
  int nodes = 1;       // N
  int local_size = 1;  // L: ranks per node (the same on every node)
  int node = 0;        // this rank's node, 0..N-1 in the order of their first world ranks
  int local_rank = 0;  // this rank's place in its node, in world-rank order
  // "2 nodes x 2 ranks" (config.json, checkpoints and the resume check compare it).
  std::string describe() const;
};

// The layout of `world`: nodes are the ranks that share a host name (`ranks_per_node` 0:
// --hierarchy node), or every `ranks_per_node` consecutive ranks (--hierarchy N: a node's
// ranks as a launcher that fills nodes in rank order places them; for one machine and
// tests). Collective. Throws naming the nodes when they hold different numbers of ranks.
NodeLayout find_node_layout(Communicator& world, int ranks_per_node);

// Slice l of a bucket of n elements among L ranks: [n l / L, n (l + 1) / L).
inline int64_t slice_start(int64_t n, int l, int parts) {
  return n * l / parts;
}
std::vector<int64_t> slice_counts(int64_t n, int parts);

class HierarchicalHook : public BucketHook {
 public:
  // Splits `world` into this rank's node and cross-node groups (collective: every rank
  // constructs its hook at the same point). `inner` exchanges across nodes.
  HierarchicalHook(std::shared_ptr<BucketHook> inner, Communicator& world, NodeLayout layout);
  std::string name() const override { return inner_->name(); }
  void exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                int64_t iteration) override;

  const NodeLayout& layout() const { return layout_; }
  // True when the exchange takes two levels (more than one node).
  bool two_level() const { return layout_.nodes > 1; }
  // The bucket the wrapped hook sees on this rank: the slice it owns (the whole bucket
  // with one node). Its id is the bucket's, so per-bucket state keys do not change.
  Bucket slice_of(const Bucket& bucket) const;
  std::vector<Bucket> slices_of(const std::vector<Bucket>& buckets) const;
  // The groups (tests, the planner's probe): this rank's node, and the ranks of its local
  // rank on every node. Without two levels both are null.
  Communicator* node_group() { return node_.get(); }
  Communicator* cross_group() { return cross_.get(); }
  BucketHook& inner() { return *inner_; }

 private:
  std::shared_ptr<BucketHook> inner_;
  NodeLayout layout_;
  int world_size_ = 1;
  std::unique_ptr<Communicator> node_, cross_;
  std::map<int, Tensor> part_;  // per bucket: this rank's slice between the collectives
  int64_t region_ = 0;          // floats per region of a shared segment (see the .cpp)

  // Steps 1 and 3 through the node's shared segments (host memory, ranks on one host).
  void reduce_scatter_shared(SharedSegments& shared, Tensor& grads, Tensor& part);
  void allgather_shared(SharedSegments& shared, const Tensor& part, Tensor& grads);
};

}  // namespace st
