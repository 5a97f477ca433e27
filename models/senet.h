// Squeeze-and-excitation networks for 32x32 input (CIFAR), as trained in the MiCRO,
// ExDyna and SIDCo experiments: the SE module of Hu et al. 2018 (layers/squeeze_excite.h,
// reduction 16, fc1/fc2 as 1x1 convolutions with bias) in ResNet-18-shaped networks with
// stages [2, 2, 2, 2] of 64/128/256/512 filters, a 3x3 stem of 64 filters without bias
// (conv1, bn1, ReLU) and no max-pool, then linear 512 -> classes.
//  * senet18 (kuangliu/pytorch-cifar's SENet18): pre-activation blocks (He et al. 2016b):
//    BN-ReLU-conv3x3, BN-ReLU-conv3x3, SE, then + shortcut; the shortcut is a 1x1 conv
//    without bias on the pre-activated input where the shape changes ("shortcut.0"), else
//    the block's input; average pool 4x4. 11,260,354 parameters for 10 classes, 11,306,524 for 100.
//  * se_resnet18: resnet18_cifar's BasicBlock (conv-BN-ReLU-conv-BN) with SE before the
//    residual add and the ReLU after it, projection shortcut conv1x1 + BN ("shortcut.0",
//    "shortcut.1"); global average pool. 11,263,042 parameters for 10 classes, 11,309,212
//    for 100.
// Names as the reference ("layer2.0.fc1.weight"), PyTorch default init.
#pragma once

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

LayerPtr cifar_senet18(int64_t num_classes, int64_t input_channels, Rng& rng);
LayerPtr cifar_se_resnet18(int64_t num_classes, int64_t input_channels, Rng& rng);

}  // namespace st
