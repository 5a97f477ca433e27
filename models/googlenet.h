// GoogLeNet for 32x32 input (CIFAR), as trained in the MiCRO, ExDyna and SIDCo experiments
// (kuangliu/pytorch-cifar): Inception modules of Szegedy et al. 2015 (table 1's widths)
// behind a 3x3 stem of 192 filters instead of the ImageNet stem, the 5x5 branch as two
// 3x3 convolutions, every convolution with bias and followed by BatchNorm and ReLU.
//   pre_layers (conv 3->192, BN, ReLU); a3, b3; max-pool 3/2/1; a4 .. e4; max-pool;
//   a5, b5; average pool 8x8; linear 1024 -> classes.
// Each Inception: b1 = 1x1; b2 = 1x1 -> 3x3; b3 = 1x1 -> 3x3 -> 3x3; b4 = max-pool 3/1/1
// -> 1x1; joined on channels (layers/concat.h). Names as the reference ("a3.b2.3.weight",
// "pre_layers.0.bias", "linear.weight"), PyTorch default init: 6,166,250 parameters for
// 10 classes, 6,258,500 for 100.
#pragma once

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

LayerPtr cifar_googlenet(int64_t num_classes, int64_t input_channels, Rng& rng);

}  // namespace st
