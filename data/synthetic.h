// Deterministic random images for smoke tests and benchmarks without files. Example i
// is its class's coarse 8x8 pattern plus per-pixel noise, all drawn from Philox keyed by
// (seed, i), so any run sees the same data and a model can still learn it.
#pragma once

#include <vector>

#include "data/dataset.h"

namespace st {

class SyntheticDataset : public ImageDataset {
 public:
  // shape = source [C, H, W]; the transform (none by default) applies as for real data.
  // Example i is generated as example first + i of one endless sequence, so a test
  // split (first = train size) shares the class patterns but not the samples.
  SyntheticDataset(int64_t size, const Shape& shape, int num_classes, uint64_t seed,
                   Transform transform = {}, int64_t first = 0);

  std::string name() const override;
  int64_t size() const override { return size_; }
  int num_classes() const override { return classes_; }
  RawImage load(int64_t index) const override;

 private:
  static constexpr int kGrid = 8;
  int64_t size_, first_;
  int channels_, height_, width_, classes_;
  uint64_t seed_;
  std::vector<uint8_t> patterns_;  // classes x C x kGrid x kGrid, values in [64, 192)
};

}  // namespace st
