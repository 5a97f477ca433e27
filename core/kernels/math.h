// Elementwise math shared by the CPU loops and the CUDA kernels (one formula, two
// backends). Each function is the per-element body; backends supply the loop.
#pragma once

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
ST_HD bool dropout_keep(uint64_t seed, uint64_t stream, uint64_t i, float p) {
  return philox_uniform(seed, stream, i) >= p;
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

}  // namespace st::math
