// The model registry behind --arch: one table row per architecture name. Adding a model
// = its own file plus one row in registry.cpp (and a parameter-count test).
#pragma once

#include <string>
#include <vector>

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

struct ArchInfo {
  std::string name;         // the --arch value, e.g. "resnet20"
  std::string description;  // one line for --help
  int64_t image_size;       // natural input side (224 ImageNet, 32 CIFAR, 28 MNIST)
};

// Every architecture, in --help order.
const std::vector<ArchInfo>& model_archs();
std::vector<std::string> model_names();
// Throws st::Error "unknown --arch 'x'; valid: ..." for an unknown name.
const ArchInfo& arch_info(const std::string& arch);

// Builds `arch` for `num_classes` outputs on `input_channels`-channel images (1 for
// Fashion-MNIST, 3 for CIFAR and ImageNet). image_size only matters to models whose
// classifier sees a flattened map (small_cnn); 0 means the architecture's own size.
// Parameters are initialised from `rng`, so the same seed builds the same model.
LayerPtr make_model(const std::string& arch, int64_t num_classes, int64_t input_channels, Rng& rng,
                    int64_t image_size = 0);

}  // namespace st
