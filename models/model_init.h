// Weight initialisation schemes of the reference model code, applied to a built model
// the way PyTorch models loop over their modules after construction.
#pragma once

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

enum class FanMode { FanIn, FanOut };

// kaiming_normal_(w, mode, nonlinearity="relu") of He et al. 2015 (eq. 10 / 14):
// N(0, 2 / fan) with fan from w's shape ([out, in] or [out, in, k, k]). Each tensor draws
// from its own Philox stream of `rng`, in parallel, independent of the thread count.
void kaiming_normal(Param& w, FanMode mode, Rng& rng);

// kaiming_normal on every convolution weight (rank-4 ParamKind::Weight) of `model`, and
// on Linear weights (rank 2) too when `linear` is set. Biases and norms are untouched.
void kaiming_normal_weights(Layer& model, FanMode mode, bool linear, Rng& rng);

}  // namespace st
