// Per-sample augmentation randomness: a Philox stream keyed by (seed, epoch, dataset
// index). A sample's crop and flip are therefore the same whichever worker thread, rank
// or batch position handles it, which is what makes a resumed run bit-exact.
#pragma once

#include <cstdint>

#include "core/rng.h"

namespace st {

class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t index) : seed_(seed) {
    // Counter words 1..3 carry (epoch, index); word 0 counts draws. Bit 29 of word 3
    // separates these streams from core::Rng's (which tag bits 30 and 31).
    ctr_.v[1] = static_cast<uint32_t>(epoch);
    ctr_.v[2] = static_cast<uint32_t>(index);
    ctr_.v[3] = static_cast<uint32_t>(index >> 32) | kTag;
  }

  // Next 32 random bits.
  uint32_t bits() {
    if (used_ == 4) {
      block_ = philox4x32(ctr_, static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32));
      ++ctr_.v[0];
      used_ = 0;
    }
    return block_.v[used_++];
  }
  float uniform() { return uint_to_unit(bits()); }  // [0, 1)
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n); n >= 1. 64-bit multiply-shift: bias below 2^-32.
  uint32_t below(uint32_t n) {
    uint64_t wide = (static_cast<uint64_t>(bits()) << 32) | bits();
    return static_cast<uint32_t>(static_cast<unsigned __int128>(wide) * n >> 64);
  }

 private:
  static constexpr uint32_t kTag = 1u << 29;
  uint64_t seed_;
  Philox4 ctr_{{0, 0, 0, 0}};
  Philox4 block_{{0, 0, 0, 0}};
  int used_ = 4;
};

}  // namespace st
