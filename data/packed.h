// Pre-decoded image files (FFCV's idea): an image folder is decoded once, each image's
// shorter side shrunk to a fixed size (torchvision Resize, antialiased), and stored as
// uint8 HWC in one file with an index; training maps the file into memory and runs the
// usual transform (random_resized_crop, ...) on the stored pixels, so no epoch decodes a
// JPEG. Format (little-endian; docs/DATA.md):
//   header, 64 bytes: "STPACK1\n", u32 version = 1, u32 channels = 3, u64 count,
//     u64 index_offset, u64 names_offset, u64 file_size, u32 num_classes, u32 side
//   pixels: image i is height x width x 3 bytes at its index entry's offset
//   index at index_offset: count x {u64 offset, u32 height, u32 width, i32 label, u32 0}
//   class names at names_offset: num_classes lines, each ending in '\n', to file_size
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image_folder.h"

namespace st {

struct PackOptions {
  int side = 256;          // shorter side after shrinking (smaller images are kept as they are)
  int threads = 2;         // decoding threads
  bool overwrite = false;  // replace existing pack files (otherwise they are an error)
};

// Writes every image of `folder` with its label and the class names to `out` (through a
// temporary file renamed at the end, so a crash never leaves a half-written pack).
// Returns the number of bytes written.
int64_t pack_image_folder(const ImageFolderDataset& folder, const std::filesystem::path& out,
                          const PackOptions& opt);

// `sparsetrain pack`: root/train and root/val (those that exist) to out_dir/train.stpack
// and out_dir/val.stpack; returns one summary line per split. An existing pack file it
// would write is refused before anything is decoded, unless opt.overwrite.
std::string pack_imagenet(const std::filesystem::path& root, const std::filesystem::path& out_dir,
                          const PackOptions& opt);

class PackedDataset : public ImageDataset {
 public:
  // Opens `file` and checks its header and index; a damaged file throws one line naming it.
  PackedDataset(const std::filesystem::path& file, Transform transform,
                std::string who = "packed images");

  std::string name() const override;
  int64_t size() const override { return count_; }
  int num_classes() const override { return static_cast<int>(classes_.size()); }
  RawImage load(int64_t index) const override;
  const std::vector<std::string>& classes() const { return classes_; }
  int side() const { return side_; }

  struct Entry;  // one index record, as stored

 private:
  std::string who_;
  std::filesystem::path file_;
  std::shared_ptr<const int> fd_;  // the open file, closed with the last user
  // An aligned copy of the file's index (its offset in the file need not be aligned).
  std::shared_ptr<const Entry> index_storage_;
  const Entry* index_ = nullptr;
  int64_t count_ = 0;
  int side_ = 0;
  std::vector<std::string> classes_;
};

// dir/train.stpack or dir/val.stpack (`--dataset imagenet-packed`); checks that both
// splits, when both exist, list the same classes.
std::shared_ptr<PackedDataset> open_packed_imagenet(const std::filesystem::path& dir, bool train,
                                                    Transform transform);

}  // namespace st
