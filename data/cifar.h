// CIFAR-10 and CIFAR-100, binary versions (Krizhevsky, 2009). CIFAR-10: data_batch_1..5.bin
// and test_batch.bin, 10000 records each of <label byte><3072 bytes R, G, B planes of 32x32>.
// CIFAR-100: train.bin (50000) and test.bin (10000), records of <coarse><fine><3072 bytes>;
// the fine label (100 classes) is the label. The whole split is held in memory (~150 MB).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace st {

enum class CifarKind { kCifar10, kCifar100 };

struct CifarOptions {
  // Require the official record counts, which catches a file truncated at a record
  // boundary; off = any positive whole number of records (small test files).
  bool official_sizes = true;
};

class CifarDataset : public ImageDataset {
 public:
  // dir holds the .bin files, or their official parent folder (cifar-10-batches-bin,
  // cifar-100-binary) does.
  CifarDataset(const std::filesystem::path& dir, CifarKind kind, bool train, Transform transform,
               CifarOptions options = {});

  std::string name() const override;
  int64_t size() const override { return count_; }
  int num_classes() const override { return kind_ == CifarKind::kCifar10 ? 10 : 100; }
  RawImage load(int64_t index) const override;

  // The file names of a split, in reading order.
  static std::vector<std::string> file_names(CifarKind kind, bool train);

 private:
  CifarKind kind_;
  std::string split_;
  std::filesystem::path dir_;
  int64_t record_ = 0;  // bytes per record
  int64_t count_ = 0;
  std::vector<uint8_t> records_;
};

}  // namespace st
