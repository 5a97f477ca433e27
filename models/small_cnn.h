// A small CNN for MNIST-sized input (1x28x28), in the spirit of the PyTorch MNIST
// example: two conv3x3(32, 64)-BN-ReLU-maxpool2 blocks, then a linear classifier over
// the flattened 64 x (s/4) x (s/4) map. About 50k parameters at 28x28; trains to ~90% on
// Fashion-MNIST within an epoch on a CPU.
#pragma once

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

// image_size: the side of the square input (28 for MNIST, 32 for CIFAR); fixes fc's width.
LayerPtr small_cnn(int64_t num_classes, int64_t input_channels, int64_t image_size, Rng& rng);

}  // namespace st
