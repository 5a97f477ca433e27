// RedSync's threshold search (Fang et al., "RedSync: Reducing Synchronization Traffic
// for Distributed Deep Learning", JPDC 2019, arXiv 1808.04357;
// docs/ALGORITHMS.md): with mean and max of |x|,
//   thr(r) = mean + r * (max - mean),  r in [0, 1]
// binary-searched until k < nnz(|x| > thr) < 2k: too many -> raise r, too few -> lower r.
// At most `iters` counts (20; the bisection then resolves r to 1e-6); if the window is
// never hit the last threshold is used, or the last one that selected something.
// Allgather-sum.
#pragma once

#include <vector>

#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

class RedSync : public Sparsifier {
 public:
  static constexpr int kIters = 20;  // resolves r to 1e-6 (--sp iters)
  explicit RedSync(int iters = kIters);
  // The --sp key iters, which the registry row lists; the constructor reads its value.
  static std::vector<SpKey> keys();
  explicit RedSync(const SpValues& v);
  std::string name() const override { return "redsync"; }
  ExchangePattern pattern() const override { return ExchangePattern::AllgatherSum; }
  // Constant |x| (all zeros, say) has nothing above mean + r (max - mean).
  bool sends_at_least_one() const override { return false; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;

 private:
  int iters_;
};

}  // namespace st
