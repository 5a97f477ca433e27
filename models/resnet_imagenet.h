// ImageNet ResNets as torchvision.models.resnet{18,34,50,101,152} (He et al. 2016, table 1;
// the Bottleneck strides on its 3x3 conv, "ResNet v1.5"): 7x7/2 stem conv, 3x3/2
// max-pool, four stages, global average pool, fc. Parameter names, order and counts
// equal torchvision's (conv1.weight, bn1.running_mean, layer1.0.conv1.weight,
// layer2.0.downsample.0.weight, fc.weight, ...): 11,689,512 / 21,797,672 / 25,557,032 /
// 44,549,160 / 60,192,808 with 1000 classes. Init as torchvision: kaiming_normal
// (fan_out) on convs, BatchNorm weight 1 and bias 0, fc with PyTorch's Linear default.
// Small inputs work too (28x28 reaches layer4 at 1x1).
#pragma once

#include <vector>

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

// depth in imagenet_resnet_depths(); throws st::Error listing them otherwise.
LayerPtr imagenet_resnet(int depth, int64_t num_classes, int64_t input_channels, Rng& rng);
std::vector<int> imagenet_resnet_depths();

}  // namespace st
