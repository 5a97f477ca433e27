// No compression through the sparsify pipeline (a control for experiments): the whole
// bucket is allreduced and the residual stays zero.
#pragma once

#include "sparsify/sparsifier.h"

namespace st {

class DenseSparsifier : public Sparsifier {
 public:
  std::string name() const override { return "dense"; }
  ExchangePattern pattern() const override { return ExchangePattern::Dense; }
  // Nothing is selected: the hook's dense pattern sends the whole bucket.
  void select_on(bulk::Ops& ops, const SelectContext&, const bulk::Buffer&,
                 DeviceSelection& out) override {
    ops.resize(out.indices, bulk::Elem::I32, 0);
    ops.resize(out.values, bulk::Elem::F32, 0);
    ops.resize(out.packed, bulk::Elem::U32, 0);
  }
};

}  // namespace st
