// Counter-based RNG (Philox4x32-10, Salmon et al., SC'11). A value is a pure function
// of (seed, stream, index), so the CPU and the CUDA backend produce identical numbers
// for the same element no matter how the work is split across threads or blocks.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace st {

struct Philox4 {
  uint32_t v[4];
};

ST_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Ten rounds of Philox4x32 on counter c with key k.
ST_HD Philox4 philox4x32(Philox4 c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo32(0xD2511F53u, c.v[0], &hi0);
    uint32_t lo1 = mulhilo32(0xCD9E8D57u, c.v[2], &hi1);
    Philox4 n;
    n.v[0] = hi1 ^ c.v[1] ^ k0;
    n.v[1] = lo1;
    n.v[2] = hi0 ^ c.v[3] ^ k1;
    n.v[3] = lo0;
    c = n;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Four 32-bit random words for block `index` of stream `stream` under `seed`.
ST_HD Philox4 philox_block(uint64_t seed, uint64_t stream, uint64_t index) {
  Philox4 c;
  c.v[0] = static_cast<uint32_t>(index);
  c.v[1] = static_cast<uint32_t>(index >> 32);
  c.v[2] = static_cast<uint32_t>(stream);
  c.v[3] = static_cast<uint32_t>(stream >> 32);
  return philox4x32(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform float in [0, 1) from the top 24 bits of a word.
ST_HD float uint_to_unit(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// The i-th uniform [0,1) number of (seed, stream).
ST_HD float philox_uniform(uint64_t seed, uint64_t stream, uint64_t i) {
  Philox4 r = philox_block(seed, stream, i >> 2);
  return uint_to_unit(r.v[i & 3]);
}

// Host-side generator: a seed plus a running stream counter, so each consumer
// (a dropout call, a weight init, a shuffle) draws from a fresh stream. Its whole
// state is two integers, which is what a checkpoint stores.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t next_stream() { return stream_++; }
  uint64_t stream() const { return stream_; }
  void set_state(uint64_t seed, uint64_t stream) {
    seed_ = seed;
    stream_ = stream;
  }

  // Sequential draws on the current stream (host only, for init and shuffles): the
  // counter-th number of philox_uniform. One Philox block gives four numbers; the last
  // block is kept so that consecutive draws compute it once (initialising a 60M-parameter
  // model spent three quarters of its time recomputing blocks).
  float uniform() {
    const uint64_t i = counter_++;
    if ((i >> 2) != block_index_ || seed_ != block_seed_ || stream_ != block_stream_) {
      block_ = philox_block(seed_, stream_ | (1ull << 63), i >> 2);
      block_index_ = i >> 2;
      block_seed_ = seed_;
      block_stream_ = stream_;
    }
    return uint_to_unit(block_.v[i & 3]);
  }
  float normal();              // Box-Muller on two uniforms
  uint32_t below(uint32_t n);  // uniform integer in [0, n)

 private:
  uint64_t seed_ = 0;
  uint64_t stream_ = 0;
  uint64_t counter_ = 0;
  // The last block computed, and the (seed, stream, block) it belongs to.
  Philox4 block_{};
  uint64_t block_index_ = ~uint64_t{0}, block_seed_ = 0, block_stream_ = 0;
};

}  // namespace st
