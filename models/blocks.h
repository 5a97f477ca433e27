// Residual blocks of He et al. 2016 built from layers/ pieces, with the child names of
// torchvision's BasicBlock and Bottleneck (conv1, bn1, ..., <shortcut_name>.0, .1), so
// parameter names come out as "layer2.0.conv1.weight", "layer2.0.downsample.0.weight".
#pragma once

#include <string>

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

// BasicBlock (fig. 5 left): relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)) with 3x3
// convs, the first carrying the stride. shortcut == nullptr means identity.
LayerPtr basic_block(int64_t in_channels, int64_t out_channels, int stride, LayerPtr shortcut,
                     const std::string& shortcut_name, Rng& rng);

// Bottleneck (fig. 5 right): 1x1 reduce to `width`, 3x3 (stride here, torchvision v1.5),
// 1x1 expand to 4 * width, then add the shortcut and relu.
constexpr int64_t kBottleneckExpansion = 4;
LayerPtr bottleneck_block(int64_t in_channels, int64_t width, int stride, LayerPtr shortcut,
                          const std::string& shortcut_name, Rng& rng);

// Projection shortcut (option B, eq. 2): 1x1 conv with stride, no bias, then BatchNorm;
// children "0" and "1" as torchvision's downsample Sequential.
LayerPtr projection_shortcut(int64_t in_channels, int64_t out_channels, int stride, Rng& rng);

}  // namespace st
