// --precision for a whole model: every Conv2d and Linear computes with 16-bit operands
// (docs/PRECISION.md); every other layer (BatchNorm and its statistics, pooling, the
// loss) and every parameter stay fp32.
#pragma once

#include "core/kernels/half.h"
#include "layers/layer.h"

namespace st {

// Sets `p` on the model's Conv2d and Linear layers; returns how many there are.
int set_model_precision(Layer& model, Precision p);

}  // namespace st
