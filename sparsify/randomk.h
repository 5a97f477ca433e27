// Random-k (Stich et al., "Sparsified SGD with Memory", NeurIPS 2018;
// docs/ALGORITHMS.md): k distinct positions drawn uniformly from a Philox stream keyed by
// (seed, bucket, t). Every rank draws the same positions, so the values are allreduced
// directly (no index exchange). Positions are returned sorted.
#pragma once

#include "sparsify/sparsifier.h"

namespace st {

class RandomK : public Sparsifier {
 public:
  std::string name() const override { return "randomk"; }
  ExchangePattern pattern() const override { return ExchangePattern::SharedIndices; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;

  // k distinct positions in [0, n), ascending, a pure function of (seed, bucket, t).
  // Floyd's algorithm (Bentley & Floyd, CACM 1987): k draws, no shuffle of n elements.
  static void draw(uint64_t seed, int bucket, int64_t t, int64_t n, int64_t k,
                   std::vector<int32_t>& out);

 private:
  std::vector<int32_t> drawn_;  // host scratch of the draw
};

}  // namespace st
