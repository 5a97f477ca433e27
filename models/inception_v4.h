// Inception-v4 (Szegedy et al. 2016, "Inception-v4, Inception-ResNet and the Impact of
// Residual Connections on Learning", fig. 9) for 32x32 input (CIFAR), as ExDyna trains it
// on CIFAR-100, in the form of weiaicunzai/pytorch-cifar100 (models/inceptionv4.py):
//   stem (fig. 3 with 3x3 convolutions, no stride: 32 -> 30 pixels, 384 channels);
//   4 x InceptionA (fig. 4, 384 channels); ReductionA (fig. 7, k=192, l=224, m=256,
//   n=384: 30 -> 14 pixels, 1024 channels); 7 x InceptionB (fig. 5, 1x7 and 7x1
//   convolutions); ReductionB (fig. 8: 14 -> 7 pixels, 1536 channels); 3 x InceptionC
//   (fig. 6, 1x3 and 3x1 convolutions); average pool 7; dropout 0.2; linear.
// Every convolution is the reference's BasicConv2d: no bias, then BatchNorm and ReLU
// (children "conv", "bn"). Names as the reference ("stem.conv1.0.conv.weight",
// "inception_b.InceptionB_3.branch7x7stack.2.bn.running_mean", "linear.weight"); PyTorch
// default init: 41,158,186 parameters for 10 classes, 41,296,516 for 100. The reference's
// Dropout2d drops whole channels of a 1x1 map, which is element-wise dropout here.
#pragma once

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

LayerPtr inception_v4(int64_t num_classes, int64_t input_channels, Rng& rng);

}  // namespace st
