// No compression through the sparsify pipeline (a control for experiments): the whole
// bucket is allreduced and the residual stays zero.
#pragma once

#include "sparsify/sparsifier.h"

namespace st {

class DenseSparsifier : public Sparsifier {
 public:
  std::string name() const override { return "dense"; }
  ExchangePattern pattern() const override { return ExchangePattern::Dense; }
  void select(const SelectContext&, const float*, int64_t, Selection&) override {}
};

}  // namespace st
