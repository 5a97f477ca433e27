// Elementwise math shared by the CPU loops and the CUDA kernels (one formula, two
// backends). Each function is the per-element body; backends supply the loop.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/rng.h"

namespace st::math {

ST_HD float relu(float x) {
  return x > 0.0f ? x : 0.0f;
}
// d relu / dx at x, times upstream dy (subgradient 0 at the kink, as PyTorch).
ST_HD float relu_backward(float x_or_y, float dy) {
  return x_or_y > 0.0f ? dy : 0.0f;
}

// Inverted dropout: keep with probability 1-p and scale by 1/(1-p). The keep decision
// is a pure function of (seed, stream, i), so CPU and GPU drop the same elements.
// The decision from element i's random word (word i & 3 of Philox block i >> 2), for
// loops that draw a block once per four elements.
ST_HD bool dropout_keeps_word(uint32_t word, float p) {
  return uint_to_unit(word) >= p;
}
ST_HD bool dropout_keep(uint64_t seed, uint64_t stream, uint64_t i, float p) {
  return dropout_keeps_word(philox_block(seed, stream, i >> 2).v[i & 3], p);
}

// BatchNorm forward on one element, given the channel's mean and 1/sqrt(var+eps).
ST_HD float bn_normalize(float x, float mean, float inv_std, float gamma, float beta) {
  return (x - mean) * inv_std * gamma + beta;
}

// BatchNorm training backward on one element (Ioffe & Szegedy 2015, eq. in sec. 3):
// dx = gamma*inv_std/m * (m*dy - sum(dy) - xhat*sum(dy*xhat)).
ST_HD float bn_backward_dx(float dy, float xhat, float gamma, float inv_std, float sum_dy,
                           float sum_dy_xhat, float inv_m) {
  return gamma * inv_std * (dy - inv_m * sum_dy - xhat * inv_m * sum_dy_xhat);
}

// Running statistic update, PyTorch convention: r = (1-momentum)*r + momentum*batch.
ST_HD float running_update(float running, float batch, float momentum) {
  return (1.0f - momentum) * running + momentum * batch;
}

// exp(x) without branches, so CPU loops over it vectorise (glibc's expf does not):
// x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for exactness), e^r by Cephes' expf
// polynomial, 2^n written into the exponent bits. About 2 ulp on [-87, 88]; inputs
// outside are clamped (no infinities, no denormals). CUDA uses its own __expf.
ST_HD float exp_fast(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);  // NaN passes through
  // Round to nearest by adding and removing 1.5 * 2^23 (branch-free, vectorises).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = fmaf(n, -0.693359375f, x);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r) + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
#endif
}

ST_HD float sigmoid(float x) {
  return 1.0f / (1.0f + exp_fast(-x));
}
// tanh(x) = 1 - 2 / (e^{2x} + 1): exact limits +-1, absolute error ~1e-7 near 0.
ST_HD float tanh_fast(float x) {
  return 1.0f - 2.0f / (exp_fast(2.0f * x) + 1.0f);
}

// One LSTM unit (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000;
// gate order i, f, g, o as PyTorch and cuDNN). In: the pre-activations a = W_ih x + b_ih +
// W_hh h_{t-1} + b_hh of the four gates and c_{t-1}. Out: the gate activations (written
// over the pre-activations, backward needs them), c_t and h_t:
//   i = sig(a_i), f = sig(a_f), g = tanh(a_g), o = sig(a_o)
//   c_t = f c_{t-1} + i g,   h_t = o tanh(c_t)
ST_HD void lstm_cell_forward(float& ai, float& af, float& ag, float& ao, float c_prev, float& c,
                             float& h) {
  ai = sigmoid(ai);
  af = sigmoid(af);
  ag = tanh_fast(ag);
  ao = sigmoid(ao);
  c = af * c_prev + ai * ag;
  h = ao * tanh_fast(c);
}

// Backward of lstm_cell_forward for one unit, given its gate activations i, f, g, o,
// c_{t-1}, c_t, dL/dh_t (from the output and from step t+1) and dL/dc_t from step t+1:
//   dc = dc_next + dh o (1 - tanh^2 c_t)
//   da_i = dc g i(1-i), da_f = dc c_{t-1} f(1-f), da_g = dc i (1-g^2),
//   da_o = dh tanh(c_t) o(1-o), dc_{t-1} = dc f.
ST_HD void lstm_cell_backward(float i, float f, float g, float o, float c_prev, float c, float dh,
                              float dc_next, float& dai, float& daf, float& dag, float& dao,
                              float& dc_prev) {
  const float tc = tanh_fast(c);
  const float dc = dc_next + dh * o * (1.0f - tc * tc);
  dai = dc * g * i * (1.0f - i);
  daf = dc * c_prev * f * (1.0f - f);
  dag = dc * i * (1.0f - g * g);
  dao = dh * tc * o * (1.0f - o);
  dc_prev = dc * f;
}

}  // namespace st::math
