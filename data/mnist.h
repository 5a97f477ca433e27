// MNIST and Fashion-MNIST in LeCun's IDX format: {train,t10k}-images-idx3-ubyte and
// {train,t10k}-labels-idx1-ubyte, gzip-compressed (.gz, read through zlib) or plain.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace st {

// A parsed IDX file of unsigned bytes: its dimensions and payload.
struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads an IDX ubyte file with `rank` dimensions, validating the magic number, the
// dimensions and the exact length; errors name the file.
IdxFile read_idx(const std::filesystem::path& path, int rank);

class MnistDataset : public ImageDataset {
 public:
  // `flavour` ("mnist", "fashion-mnist") names the dataset in errors and logs.
  MnistDataset(const std::filesystem::path& dir, bool train, Transform transform,
               std::string flavour = "mnist");

  std::string name() const override;
  int64_t size() const override { return count_; }
  int num_classes() const override { return 10; }
  RawImage load(int64_t index) const override;

 private:
  std::string flavour_, split_;
  std::filesystem::path dir_;
  int64_t count_ = 0;
  int rows_ = 0, cols_ = 0;
  std::vector<uint8_t> images_;  // count x rows x cols
  std::vector<uint8_t> labels_;
};

}  // namespace st
