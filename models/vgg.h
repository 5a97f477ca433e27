// VGG for CIFAR (Simonyan & Zisserman 2015, table 1, with BatchNorm after each conv as in
// kuangliu/pytorch-cifar): "features" = conv3x3(bias)-BN-ReLU blocks and 2x2 max-pools,
// then "classifier" = Linear(512, classes). VGG-16 has 14,728,266 parameters with 10
// classes; names as the reference (features.0.weight, features.1.running_mean, ...,
// classifier.weight). The last pool is a global max-pool: identical on 32x32 input
// (a 2x2 map), and it lets 28x28 input through (a 1x1 map there).
#pragma once

#include <string>
#include <vector>

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

// depth 11, 13, 16 or 19 (configurations A, B, D, E); throws st::Error otherwise.
LayerPtr vgg_cifar(int depth, int64_t num_classes, int64_t input_channels, Rng& rng);

}  // namespace st
