// Datasets by name, with the standard transforms, for the CLI's --dataset / --data-dir.
// One row per dataset: the built-in readers, then those a program or library registers
// with register_dataset (or a static DatasetRegistrar) to train on its own format with
// --dataset <name> through st::train.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"

namespace st {

// Where Debian's dataset-fashion-mnist package installs Fashion-MNIST: the folder
// --dataset fashion-mnist reads when no --data-dir is given.
inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct DatasetSpec {
  std::string name = {};           // one of dataset_names()
  std::filesystem::path dir = {};  // --data-dir (unused by synthetic)
  bool train = true;               // train split, else test / val
  bool augment = true;             // standard training augmentation (train split only)
  int image_size = 224;            // imagenet: crop side; val resizes to image_size * 8 / 7
  // synthetic only: source shape [C, H, W], classes, examples in the split, data seed.
  Shape shape = {3, 32, 32};
  int num_classes = 10;
  int64_t size = 0;  // 0 = 50000 train / 10000 test
  uint64_t seed = 0;
};

// A registry row: the --dataset value, a one-line description and the reader. `open`
// gets the whole spec (folder, split, augmentation, image size, seed) and returns the
// split with its transform applied; errors name the file or folder.
struct DatasetInfo {
  std::string name;
  std::string description;
  std::function<std::shared_ptr<Dataset>(const DatasetSpec&)> open;
};

// Every row: "mnist", "fashion-mnist", "cifar10", "cifar100", "imagenet", "synthetic",
// "imagenet-packed" (--data-dir holds train.stpack / val.stpack from `sparsetrain pack`),
// then the registered ones.
const std::vector<DatasetInfo>& datasets();
const std::vector<std::string>& dataset_names();
// Adds a dataset next to the built-in ones. Throws st::Error for an empty name, a name
// already taken or a row without a reader. Register before training starts (at static
// initialisation or early in main).
void register_dataset(DatasetInfo info);
// Registers its row when constructed; a namespace-scope object in the reader's own file:
//   static const st::DatasetRegistrar reg({"csv", "images as CSV rows", open_csv});
struct DatasetRegistrar {
  explicit DatasetRegistrar(DatasetInfo info) { register_dataset(std::move(info)); }
};
// The transform open_dataset uses for a dataset and split:
//   mnist / fashion-mnist: train random_crop(28, pad 2) (+ hflip for fashion-mnist);
//   cifar10 / cifar100: train random_crop(32, pad 4) + hflip;
//   imagenet, imagenet-packed: train random_resized_crop(size) + hflip, val resize(size * 8 / 7) +
//   center_crop(size); all then normalise with the dataset's mean and std.
//   synthetic: none (pixels / 255); a registered dataset: none (its reader decides).
Transform standard_transform(const std::string& name, bool train, bool augment, int image_size);
// Opens a dataset; an unknown name lists the valid ones.
std::shared_ptr<Dataset> open_dataset(const DatasetSpec& spec);

}  // namespace st
