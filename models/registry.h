// The model registry behind --arch: one table row per architecture name. Adding a model
// in the tree = its own file plus one row in registry.cpp (and a parameter-count test);
// outside the tree, a program or library adds the same kind of row with register_model
// (or a static ModelRegistrar) and trains it with --arch <name> through st::train.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

struct ArchInfo {
  std::string name;         // the --arch value, e.g. "resnet20"
  std::string description;  // one line for --help
  int64_t image_size;       // natural input side (224 ImageNet, 32 CIFAR, 28 MNIST)
};

// Builds a model for (num_classes, input_channels, image_size, rng); image_size is the
// dataset's (or the row's own when the dataset does not say).
using ModelFactory = std::function<LayerPtr(int64_t num_classes, int64_t input_channels,
                                            int64_t image_size, Rng& rng)>;

// Adds an architecture next to the built-in ones (make_model, --arch, the listings).
// Throws st::Error for an empty name, a name already taken, a negative image size or a
// missing factory. Register before training starts (at static initialisation or early
// in main); references from arch_info() may move when a row is added.
void register_model(ArchInfo info, ModelFactory make);
// Registers its row when constructed; a namespace-scope object in the model's own file:
//   static const st::ModelRegistrar reg({"tiny_resnet", "...", 32}, make_tiny_resnet);
struct ModelRegistrar {
  ModelRegistrar(ArchInfo info, ModelFactory make) {
    register_model(std::move(info), std::move(make));
  }
};

// Every architecture, in --help order (the registered ones last).
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
