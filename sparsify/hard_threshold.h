// Hard threshold (Sahu et al., "Rethinking gradient sparsification as total error
// minimization", NeurIPS 2021; the fixed lambda of the MiCRO authors' ThreshReducer;
// docs/ALGORITHMS.md): lambda = 1/(2 sqrt(k)), fixed for the whole run; select
// {|x_j| >= lambda}; union-allreduce. The density is whatever the data gives: it may
// select nothing at all (error feedback then accumulates until something crosses).
#pragma once

#include <cmath>
#include <map>

#include "sparsify/sparsifier.h"

namespace st {

class HardThreshold : public Sparsifier {
 public:
  std::string name() const override { return "hard_threshold"; }
  ExchangePattern pattern() const override { return ExchangePattern::UnionAllreduce; }
  bool sends_at_least_one() const override { return false; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;
  // lambda of the bucket (a function of k only, so equal on every rank).
  double state_signature(int bucket) const override;

  static double lambda(int64_t k) { return 1.0 / (2.0 * std::sqrt(static_cast<double>(k))); }

 private:
  std::map<int, double> lambda_;
};

}  // namespace st
