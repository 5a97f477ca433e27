// Dropout (inverted): in training, zero each element with probability p and scale the
// rest by 1/(1-p); identity in evaluation. The mask is Philox(seed, call, i), so CPU
// and CUDA drop the same elements and a resumed run draws the same masks.
#pragma once

#include <vector>

#include "layers/layer.h"

namespace st {

class Dropout : public Layer {
 public:
  explicit Dropout(float p, uint64_t seed = 0);
  std::string describe() const override { return "Dropout(p=" + std::to_string(p_) + ")"; }
  // Number of masks drawn so far; part of the RNG state a checkpoint stores.
  uint64_t calls() const { return calls_; }
  void set_calls(uint64_t calls) { calls_ = calls; }
  uint64_t seed() const { return seed_; }
  void set_seed(uint64_t seed) { seed_ = seed; }
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

// The masks drawn by each Dropout of `model` in visit order: the part of a model's random
// state that a checkpoint keeps, so that a resumed run draws the masks the uninterrupted
// run would have.
std::vector<uint64_t> dropout_calls(Layer& model);
// Restores what dropout_calls gave; throws st::Error when `model` has another number of
// Dropout layers.
void set_dropout_calls(Layer& model, const std::vector<uint64_t>& calls);
// Gives the Dropout layers of data-parallel rank `rank` seeds of their own (rank 0 keeps
// the built ones), so ranks drop different elements: every rank builds the same model from
// the same seed, and equal masks would make the P replicas one dropout sample.
void seed_dropout_for_rank(Layer& model, int rank);

}  // namespace st
