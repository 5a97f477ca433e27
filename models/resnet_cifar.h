// ResNets for 32x32 input (CIFAR), usable on 28x28 (Fashion-MNIST) since they end in
// global average pooling.
//  * He et al. 2016, sec. 4.2: a 3x3 conv with 16 filters, three stages of n BasicBlocks
//    on 32/16/8-pixel maps with 16/32/64 filters, global average pool, fc; depth 6n+2
//    (20, 32, 44, 56, 110). Shortcuts are option A by default (identity, stride-2
//    subsample and zero-padded channels, parameter-free), as the paper uses, which makes
//    ResNet-20 269,722 parameters; option B (1x1 projection + BN where the shape
//    changes) gives 272,474. Names and init follow akamaster/pytorch_resnet_cifar10:
//    conv1, bn1, layer1.0.conv1, ..., linear; kaiming_normal (fan_in) on conv and linear.
//  * The CIFAR ResNet-18 of the MiCRO and ExDyna experiments (kuangliu/pytorch-cifar):
//    3x3 stem with 64 filters and no max-pool, BasicBlock stages [2, 2, 2, 2] with
//    64/128/256/512 filters, 1x1 conv + BN projection shortcuts named "shortcut", global
//    average pool, "linear"; PyTorch default init; 11,173,962 parameters.
//  * The CIFAR ResNet-152 of MiCRO's CIFAR-10 runs (kuangliu/pytorch-cifar): the same
//    stem and head around Bottleneck stages [3, 8, 36, 3] (expansion 4, so 256 to 2048
//    channels), the stride on the 3x3 convolution; 58,156,618 parameters for 10 classes.
#pragma once

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

enum class CifarShortcut { A, B };

// depth = 6n + 2 with n >= 1; throws st::Error otherwise.
LayerPtr cifar_resnet(int depth, int64_t num_classes, int64_t input_channels, Rng& rng,
                      CifarShortcut shortcut = CifarShortcut::A);

LayerPtr cifar_resnet18(int64_t num_classes, int64_t input_channels, Rng& rng);

LayerPtr cifar_resnet152(int64_t num_classes, int64_t input_channels, Rng& rng);

}  // namespace st
