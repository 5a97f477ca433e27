// The per-sample squared-gradient sums a sparsifier whose registry row asks for them reads (VGC,
// sparsify/vgc.h): one flat buffer laid out like FlatParams' gradients, each
// Param::sq_grad a view of it (so the layers fill it in place), and the hook's aux
// provider handing out a bucket's slice. Parameters whose layer does not provide the
// sums get sq_grad_fallback() from their gradient.
// Usage (the training loop): construct after FlatParams, install `provider()` on the hook,
// call zero() with FlatParams::zero_grads() before every backward.
#pragma once

#include <cstdint>
#include <functional>

#include "comm/reducer.h"
#include "core/tensor.h"
#include "layers/flat_params.h"

namespace st {

// g^2 / B: the fallback estimate of s / B^2 for n elements of raw gradient g (a lower
// bound of the per-sample sum, see sparsify/vgc.h).
void sq_grad_fallback(const float* g, int64_t n, int64_t batch, float* out);

class SqGradients {
 public:
  SqGradients(FlatParams& flat, int64_t batch_per_rank);
  ~SqGradients();
  SqGradients(const SqGradients&) = delete;
  SqGradients& operator=(const SqGradients&) = delete;
  void zero() { flat_sq_.zero(); }
  // The provider: the bucket's slice, fallback estimates filled in. Communication thread.
  Tensor bucket(const Bucket& b);
  std::function<Tensor(const Bucket&)> provider() {
    return [this](const Bucket& b) { return bucket(b); };
  }

 private:
  FlatParams& flat_;
  int64_t batch_;
  Tensor flat_sq_;
};

}  // namespace st
