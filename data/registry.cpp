#include "data/registry.h"

#include "core/word_list.h"
#include "data/cifar.h"
#include "data/image_folder.h"
#include "data/mnist.h"
#include "data/packed.h"
#include "data/synthetic.h"

namespace st {

namespace {

// The built-in readers with their standard transforms.
std::vector<DatasetInfo> builtin_rows() {
  const auto t = [](const DatasetSpec& s) {
    return standard_transform(s.name, s.train, s.augment, s.image_size);
  };
  const auto mnist = [t](const DatasetSpec& s) -> std::shared_ptr<Dataset> {
    return std::make_shared<MnistDataset>(s.dir, s.train, t(s), s.name);
  };
  const auto cifar = [t](CifarKind kind) {
    return [t, kind](const DatasetSpec& s) -> std::shared_ptr<Dataset> {
      return std::make_shared<CifarDataset>(s.dir, kind, s.train, t(s));
    };
  };
  return {
      {"mnist", "MNIST digits (IDX files, optionally gzipped)", mnist},
      {"fashion-mnist", "Fashion-MNIST (IDX files, optionally gzipped)", mnist},
      {"cifar10", "CIFAR-10 (binary batches)", cifar(CifarKind::kCifar10)},
      {"cifar100", "CIFAR-100 (binary batches)", cifar(CifarKind::kCifar100)},
      {"imagenet", "ImageNet as train/ and val/ class folders of JPEGs",
       [t](const DatasetSpec& s) { return open_imagenet(s.dir, s.train, t(s)); }},
      {"synthetic", "generated labelled images of --synthetic-size examples",
       [t](const DatasetSpec& s) -> std::shared_ptr<Dataset> {
         const int64_t size = s.size > 0 ? s.size : (s.train ? 50000 : 10000);
         // The test split starts far along the sequence, so it never repeats a train example.
         const int64_t first = s.train ? 0 : int64_t{1} << 40;
         return std::make_shared<SyntheticDataset>(size, s.shape, s.num_classes, s.seed, t(s),
                                                   first);
       }},
      {"imagenet-packed", "ImageNet pre-decoded by `sparsetrain pack`",
       [t](const DatasetSpec& s) { return open_packed_imagenet(s.dir, s.train, t(s)); }},
  };
}

std::vector<DatasetInfo>& rows() {
  static std::vector<DatasetInfo> r = builtin_rows();
  return r;
}

std::vector<std::string>& names() {
  static std::vector<std::string> n = [] {
    std::vector<std::string> out;
    for (const DatasetInfo& d : rows()) out.push_back(d.name);
    return out;
  }();
  return n;
}

void check_name(const std::string& name) {
  for (const std::string& n : names())
    if (n == name) return;
  ST_THROW("unknown dataset '", name, "'; valid: ", word_list(names()));
}

// The built-in rows come first in rows(); registered ones follow.
bool is_builtin(const std::string& name) {
  static const size_t builtins = builtin_rows().size();
  for (size_t i = 0; i < builtins; ++i)
    if (rows()[i].name == name) return true;
  return false;
}

}  // namespace

const std::vector<DatasetInfo>& datasets() {
  return rows();
}

const std::vector<std::string>& dataset_names() {
  return names();
}

void register_dataset(DatasetInfo info) {
  ST_CHECK(!info.name.empty(), "register_dataset: the dataset needs a name");
  ST_CHECK(static_cast<bool>(info.open), "register_dataset('", info.name, "'): no reader");
  for (const DatasetInfo& d : rows())
    ST_CHECK(d.name != info.name, "register_dataset('", info.name,
             "'): a dataset of that name exists");
  names().push_back(info.name);
  rows().push_back(std::move(info));
}

Transform standard_transform(const std::string& name, bool train, bool augment, int image_size) {
  check_name(name);
  if (!is_builtin(name)) return Transform();
  const bool aug = train && augment;
  Transform t;
  if (name == "mnist" || name == "fashion-mnist") {
    if (aug) t.random_crop(28, 2);
    // Clothes look the same mirrored; digits do not.
    if (aug && name == "fashion-mnist") t.horizontal_flip();
    t.normalize(name == "mnist" ? Normalization::mnist() : Normalization::fashion_mnist());
  } else if (name == "cifar10" || name == "cifar100") {
    if (aug) t.random_crop(32, 4).horizontal_flip();
    t.normalize(name == "cifar10" ? Normalization::cifar10() : Normalization::cifar100());
  } else if (name == "imagenet" || name == "imagenet-packed") {
    if (train) {
      // Without augmentation a train image is still cropped to the model's input size.
      if (aug) {
        t.random_resized_crop(image_size).horizontal_flip();
      } else {
        t.resize_center_crop(image_size * 8 / 7, image_size);
      }
    } else {
      t.resize_center_crop(image_size * 8 / 7, image_size);  // 224 -> Resize(256)
    }
    t.normalize(Normalization::imagenet());
  }
  return t;
}

std::shared_ptr<Dataset> open_dataset(const DatasetSpec& spec) {
  check_name(spec.name);
  for (const DatasetInfo& d : rows())
    if (d.name == spec.name) return d.open(spec);
  ST_THROW("unknown dataset '", spec.name, "'");  // unreachable after check_name
}

}  // namespace st
