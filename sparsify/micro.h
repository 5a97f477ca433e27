// MiCRO (Yoon & Oh, "MiCRO: Near-Zero Cost Gradient Sparsification for Scaling and
// Accelerating Distributed DNN Training", HiPC 2023, arXiv 2310.00967).
//
// Each rank selects only inside an exclusive partition of the bucket, so the union of
// the ranks' selections never grows ("no gradient build-up"), and with a threshold that
// tracks the target density, so no sort or top-k is needed: one comparison pass over
// n/P elements per rank. Per bucket and iteration t (docs/ALGORITHMS.md):
//   partitions  P contiguous near-equal ranges; rank r owns (t + r) mod P
//   select      { j in own partition : |x_j| >= tau }, or one element if none passes
//   exchange    union-allreduce (disjoint, so a concatenation)
//   threshold   tau_0 = 1/(2 sqrt(k)); after each iteration one fixed step from the
//               global transmitted count (part::next_threshold), identical everywhere.
// The rule lives in sparsify/partition_math.h, shared with the CUDA selection kernel.
#pragma once

#include <map>
#include <vector>

#include "sparsify/partition_math.h"
#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

class Micro : public Sparsifier {
 public:
  explicit Micro(const part::ThresholdRule& rule);
  // The --sp keys hi, lo, up, mid, down (defaults: part::ThresholdRule), which the registry
  // row lists, and the rule from their validated values.
  static std::vector<SpKey> keys();
  static part::ThresholdRule rule_from(const SpValues& values);

  std::string name() const override { return "micro"; }
  ExchangePattern pattern() const override { return ExchangePattern::UnionAllreduce; }
  bool partitioned() const override { return true; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;
  void observe(const ExchangeFeedback& feedback) override;
  double state_signature(int bucket) const override;
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

  // The threshold the bucket's next selection uses (0 before its first selection).
  double threshold(int bucket) const;
  // Partition p's range in a bucket that has been selected on at least once.
  virtual part::Range partition(int bucket, int p) const;

 protected:
  struct BucketRule {
    int64_t n = 0;
    int world = 1;
    double tau = 0;
  };
  // A bucket's first selection: ExDyna sets up its block grid here.
  virtual void start_bucket(int /*bucket*/, int64_t /*n*/, int /*world*/) {}
  // After the threshold step of observe(), with the same feedback on every rank.
  virtual void adapt(const ExchangeFeedback& /*feedback*/) {}
  const BucketRule& bucket_rule(int bucket) const;

 private:
  part::ThresholdRule rule_;
  std::map<int, BucketRule> buckets_;
};

}  // namespace st
