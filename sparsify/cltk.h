// CLT-k, cyclic local Top-k (Chen et al., "ScaleCom", NeurIPS 2020;
// docs/ALGORITHMS.md): at iteration t the leader rank t mod P runs exact Top-k on its own x and
// broadcasts the k indices; every rank allreduces its x there. The others select
// nothing, so the transmitted count is exactly k: no gradient build-up.
#pragma once

#include "sparsify/sparsifier.h"

namespace st {

class CltK : public Sparsifier {
 public:
  std::string name() const override { return "cltk"; }
  ExchangePattern pattern() const override { return ExchangePattern::LeaderIndices; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;

  // The rank whose indices everyone uses at iteration t (the hook uses the same rule).
  static int leader(int64_t t, int world) { return static_cast<int>(t % world); }
};

}  // namespace st
