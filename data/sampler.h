// DistributedSampler: which dataset indices rank r visits in an epoch, with PyTorch's
// semantics. Every rank shuffles the full index list identically (Philox keyed by seed
// and epoch), pads it by wrapping around so it divides evenly (or, with drop_last, cuts
// the tail), and takes every world_size-th entry starting at its rank.
#pragma once

#include <cstdint>
#include <vector>

namespace st {

struct SamplerOptions {
  int rank = 0;
  int world_size = 1;
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;  // cut the tail instead of repeating indices to even it out
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, SamplerOptions options = {});

  // This rank's indices for `epoch`; the same on every call and on every machine.
  std::vector<int64_t> indices(int64_t epoch) const;
  int64_t num_samples() const { return num_samples_; }  // per rank per epoch
  // How many of this rank's num_samples() are real examples: the padding that evens out
  // the split (repeats of the head) is the tail of each rank's list. Evaluation counts
  // only these, so every example of a split is counted once.
  int64_t real_samples() const;
  int64_t total_size() const { return num_samples_ * opt_.world_size; }
  int64_t dataset_size() const { return size_; }
  const SamplerOptions& options() const { return opt_; }

 private:
  int64_t size_;
  SamplerOptions opt_;
  int64_t num_samples_;
};

}  // namespace st
