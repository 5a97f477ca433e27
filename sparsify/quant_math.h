// Per-element math of the quantisers and wire formats, shared by the CPU and CUDA
// implementations of bulk::Ops (ST_HD). No sparsifier types here, so the interface header
// can name the formats it encodes.
//   - range-based float (Wang et al., "FFT-based gradient sparsification", HPDC 2020,
//     arXiv 1811.08596): sign, an exponent field just wide enough for the observed range
//     log2(max/min), the rest mantissa; IEEE-like (field 0 = subnormal, so 0 is exact);
//   - QSGD (Alistarh et al., NeurIPS 2017, Sec. 3.1): Q(v_i) = ||v|| sign(v_i) xi_i / s,
//     xi_i = l or l + 1 with probability |v_i| s / ||v|| - l (unbiased);
//   - TernGrad (Wen et al., NeurIPS 2017, Eq. 2): Q(v_i) = s_t sign(v_i) b_i, s_t = max|v|,
//     b_i ~ Bernoulli(|v_i| / s_t) (unbiased);
//   - VGC's 32-bit (index, sign, exponent) entries (sparsify/vgc.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace st::quant {

// ---------------------------------------------------------------- range-based float

struct RangeFloat {
  int width = 8;     // total bits: 1 sign + exp_bits + man_bits
  int exp_bits = 1;  // field 0 = subnormal/zero, 1 .. 2^exp_bits - 1 = binades
  int man_bits = 6;
  int exp0 = 0;  // field 1 is the binade [2^exp0, 2^(exp0+1))
};

// Round-to-nearest encoding. Bound: |decode(encode(v)) - v| <= 2^-(man_bits+1) |v| for
// |v| >= 2^exp0 up to the top binade's last rounding step, where the code saturates
// (error <= 2^-man_bits |v|); <= 2^(exp0 - man_bits - 1) below 2^exp0.
ST_HD uint32_t range_float_encode(const RangeFloat& f, float v) {
  const uint32_t sign = v < 0 ? 1u : 0u;
  const float a = fabsf(v);
  const uint32_t max_mag = (1u << (f.exp_bits + f.man_bits)) - 1u;
  uint32_t mag;
  if (!(a > 0)) {
    mag = 0;
  } else if (a < ldexpf(1.0f, f.exp0)) {
    mag = static_cast<uint32_t>(floorf(ldexpf(a, f.man_bits - f.exp0) + 0.5f));
  } else {
    int e2;
    const float m = frexpf(a, &e2);  // a = m 2^e2, m in [0.5, 1): binade e2 - 1
    const int field = e2 - 1 - f.exp0 + 1;
    const float frac = ldexpf(m, 1) - 1.0f;  // in [0, 1)
    const uint32_t man = static_cast<uint32_t>(floorf(ldexpf(frac, f.man_bits) + 0.5f));
    // A mantissa that rounds up to 2^man_bits carries into the next binade, as in IEEE.
    mag = field > static_cast<int>(max_mag >> f.man_bits)
              ? max_mag
              : (static_cast<uint32_t>(field) << f.man_bits) + man;
  }
  if (mag > max_mag) mag = max_mag;
  return (sign << (f.width - 1)) | mag;
}

ST_HD float range_float_decode(const RangeFloat& f, uint32_t code) {
  const uint32_t mag = code & ((1u << (f.width - 1)) - 1u);
  const int field = static_cast<int>(mag >> f.man_bits);
  const uint32_t man = mag & ((1u << f.man_bits) - 1u);
  const float a = field == 0 ? ldexpf(static_cast<float>(man), f.exp0 - f.man_bits)
                             : ldexpf(static_cast<float>((1u << f.man_bits) + man),
                                      f.exp0 + field - 1 - f.man_bits);
  return (code >> (f.width - 1)) & 1u ? -a : a;
}

// ---------------------------------------------------------------- QSGD and TernGrad

// QSGD level in [-s, s] for v given the chunk norm and a uniform u in [0, 1).
ST_HD int32_t qsgd_level(float v, float norm, int32_t s, float u) {
  if (!(norm > 0)) return 0;
  const float r = fminf(fabsf(v) / norm, 1.0f) * static_cast<float>(s);
  int32_t l = static_cast<int32_t>(floorf(r));
  if (l < s && u < r - static_cast<float>(l)) ++l;
  return v < 0 ? -l : l;
}
ST_HD float qsgd_value(int32_t level, float norm, int32_t s) {
  return norm * static_cast<float>(level) / static_cast<float>(s);
}

// TernGrad's scale s_t with the paper's gradient clipping (Sec. 3.3): v_i is clipped to
// [-c sigma, c sigma] (sigma: standard deviation of the chunk, c = 2.5 in the paper), so
// s_t = min(max |v|, c sigma); clip <= 0 keeps s_t = max |v|. Where |v_i| > s_t,
// terngrad_level sends sign(v_i) with probability 1: Q(v_i) = s_t sign(v_i), the clipped value.
ST_HD float terngrad_scale(float max_abs, double sum, double sumsq, int64_t count, float clip) {
  if (!(clip > 0) || count <= 0) return max_abs;
  const double mean = sum / static_cast<double>(count);
  const double var = fmax(0.0, sumsq / static_cast<double>(count) - mean * mean);
  return fminf(max_abs, static_cast<float>(static_cast<double>(clip) * sqrt(var)));
}
// TernGrad: -1, 0 or +1 for v given the chunk's scale s_t and a uniform u in [0, 1).
ST_HD int32_t terngrad_level(float v, float scale, float u) {
  if (!(scale > 0)) return 0;
  return u < fabsf(v) / scale ? (v < 0 ? -1 : 1) : 0;
}
ST_HD float terngrad_value(int32_t level, float scale) {
  return scale * static_cast<float>(level);
}

// Signed level <-> sign-magnitude code of `bits` bits (sign in the top bit).
ST_HD uint32_t level_code(int32_t level, int bits) {
  return level < 0 ? (1u << (bits - 1)) | static_cast<uint32_t>(-level)
                   : static_cast<uint32_t>(level);
}
ST_HD int32_t code_level(uint32_t code, int bits) {
  const int32_t mag = static_cast<int32_t>(code & ((1u << (bits - 1)) - 1u));
  return (code >> (bits - 1)) & 1u ? -mag : mag;
}

// Stream id of a (rank, bucket, iteration) for Philox: every rank, bucket and step
// draws different numbers, reproducibly (SplitMix64 finaliser as the mixer).
ST_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
ST_HD uint64_t rounding_stream(int rank, int bucket, int64_t iteration) {
  return mix64(
      mix64(mix64(static_cast<uint64_t>(iteration) + 0x51ull) ^ static_cast<uint64_t>(bucket)) ^
      static_cast<uint64_t>(rank));
}

// ---------------------------------------------------------------- VGC entries

// [ index : ib bits | sign : 1 bit | e : 31 - ib bits ], value = sign * scale * 2^-e with
// e chosen so the value is the nearest power-of-two fraction of scale (relative error
// <= 1/3); e saturates at 2^(31-ib) - 1.
ST_HD uint32_t vgc_encode(int32_t index, float value, float scale, int ib) {
  const int eb = 31 - ib;
  const int emax = (1 << eb) - 1;
  int e = emax;
  const float a = fabsf(value);
  if (a > 0 && scale > 0) {
    // a / scale = m 2^q, m in [0.5, 1): nearest of 2^q (m >= 3/4) and 2^(q-1).
    int q;
    const float m = frexpf(a / scale, &q);
    e = m >= 0.75f ? -q : 1 - q;
    e = e < 0 ? 0 : (e > emax ? emax : e);
  }
  const uint32_t sign = value < 0 ? 1u : 0u;
  return static_cast<uint32_t>(index) | sign << ib | static_cast<uint32_t>(e) << (ib + 1);
}
ST_HD int32_t vgc_index(uint32_t word, int ib) {
  return static_cast<int32_t>(word & ((1u << ib) - 1u));
}
ST_HD float vgc_value(uint32_t word, float scale, int ib) {
  const int e = static_cast<int>(word >> (ib + 1));
  const float a = ldexpf(scale, -e);
  return (word >> ib) & 1u ? -a : a;
}

}  // namespace st::quant
