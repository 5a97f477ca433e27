// Gradient-norm clipping as torch.nn.utils.clip_grad_norm_ (Pascanu et al. 2013, alg. 1):
// the global L2 norm over all gradients; when it exceeds max_norm every gradient is
// scaled by max_norm / (norm + 1e-6).
#pragma once

#include <vector>

#include "layers/param.h"

namespace st {

// Returns the norm before clipping (non-finite when a gradient is; nothing is scaled then).
double clip_grad_norm(const std::vector<Param*>& params, double max_norm);

// The global L2 norm of the gradients, without changing them.
double grad_norm(const std::vector<Param*>& params);

}  // namespace st
