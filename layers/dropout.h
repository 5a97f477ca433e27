// Dropout (inverted): in training, zero each element with probability p and scale the
// rest by 1/(1-p); identity in evaluation. The mask is Philox(seed, call, i), so CPU
// and CUDA drop the same elements and a resumed run draws the same masks.
#pragma once

#include "layers/layer.h"

namespace st {

class Dropout : public Layer {
 public:
  explicit Dropout(float p, uint64_t seed = 0);
  std::string describe() const override { return "Dropout(p=" + std::to_string(p_) + ")"; }
  // Number of masks drawn so far; part of the RNG state a checkpoint stores.
  uint64_t calls() const { return calls_; }
  void set_calls(uint64_t calls) { calls_ = calls; }
  // Tests hold the mask fixed across forwards (finite differences need that).
  void freeze_mask(bool frozen) { frozen_ = frozen; }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  uint64_t next_stream();

  float p_;
  uint64_t seed_;
  uint64_t calls_ = 0;
  uint64_t stream_ = 0;  // stream of the last forward, reused by backward
  bool frozen_ = false;
  Shape shape_;
};

}  // namespace st
