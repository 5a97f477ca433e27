// Top-k (Aji & Heafield 2017; Lin et al. 2018): each rank keeps the k = floor(d n)
// largest |x|. Local Top-k exchanges by union-allreduce, so the union grows up to P*k
// ("gradient build-up"); global Top-k sends (index, value) pairs by allgather-sum.
#pragma once

#include "sparsify/sparsifier.h"

namespace st {

class TopK : public Sparsifier {
 public:
  explicit TopK(bool allgather) : allgather_(allgather) {}
  std::string name() const override { return allgather_ ? "gtopk" : "topk"; }
  ExchangePattern pattern() const override {
    return allgather_ ? ExchangePattern::AllgatherSum : ExchangePattern::UnionAllreduce;
  }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override;

 private:
  bool allgather_;
};

}  // namespace st
