// The per-element SGD update of torch.optim.SGD (PyTorch 1.13), shared by the CPU loop
// and a CUDA kernel. Momentum is Polyak's heavy ball in Sutskever et al. (ICML 2013)'s
// form v = mu*v + g, p -= lr*v; Nesterov uses p -= lr*(g + mu*v) as PyTorch does.
#pragma once

#include "core/host_device.h"

namespace st::math {

struct SgdCoeffs {
  float lr;
  float momentum;      // 0 disables the buffer
  float dampening;     // PyTorch's dampening; 0 in every paper we reproduce
  float weight_decay;  // L2 penalty added to the gradient: g += wd * p
};

// One element. `first` is true on the buffer's first update, where PyTorch sets
// buf = g (no dampening) instead of buf = momentum*buf + (1-dampening)*g.
template <bool kMomentum, bool kNesterov, bool kFirst>
ST_HD void sgd_update(float& p, float& buf, float grad, const SgdCoeffs& c) {
  float d = grad + c.weight_decay * p;
  if (kMomentum) {
    const float b = kFirst ? d : c.momentum * buf + (1.0f - c.dampening) * d;
    buf = b;
    d = kNesterov ? d + c.momentum * b : b;
  }
  p = p - c.lr * d;
}

}  // namespace st::math
