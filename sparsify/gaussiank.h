// Gaussian-k (Shi et al., "Understanding Top-k Sparsification in Distributed Deep
// Learning", arXiv 1911.08772; the authors' GaussianK-SGD; docs/ALGORITHMS.md).
// Treat x as N(mu, sigma^2), with mu and sigma the mean and (unbiased) standard deviation
// of the signed x as in the reference code, so that P(|x - mu| > z sigma) = d for
// z = Phi^{-1}(1 - d/2):
//   thr = mu + sigma * Phi^{-1}(1 - d/2);  select {|x_j| > thr}
// then correct: count < 2k/3 -> thr *= 0.5, count > 4k/3 -> thr *= 1.5, at most `loops`
// (3) counts; the selection is the last threshold counted (as the reference, the count
// is not guaranteed to end inside [2k/3, 4k/3]). Allgather-sum.
#pragma once

#include <vector>

#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

class GaussianK : public Sparsifier {
 public:
  static constexpr int kLoops = 3;  // the reference code's count limit (--sp loops)
  explicit GaussianK(int loops = kLoops);
  // The --sp key loops, which the registry row lists; the constructor reads its value.
  static std::vector<SpKey> keys();
  explicit GaussianK(const SpValues& v);
  std::string name() const override { return "gaussiank"; }
  ExchangePattern pattern() const override { return ExchangePattern::AllgatherSum; }
  bool sends_at_least_one() const override { return false; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;

  // mu + sigma * Phi^{-1}(1 - d/2) (Boost.Math normal quantile).
  static double initial_threshold(double mean, double stddev, double density);

 private:
  int loops_;
};

}  // namespace st
