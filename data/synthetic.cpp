#include "data/synthetic.h"

#include <cstring>

#include "core/rng.h"

namespace st {
namespace {
// Philox streams of the synthetic data, apart from augmentation and init streams.
constexpr uint64_t kPatternStream = 0x5359'4e54'0000'0000ull;  // "SYNT"
constexpr uint64_t kSampleStream = kPatternStream | 1;
}  // namespace

SyntheticDataset::SyntheticDataset(int64_t size, const Shape& shape, int num_classes, uint64_t seed,
                                   Transform transform, int64_t first)
    : ImageDataset(std::move(transform)),
      size_(size),
      first_(first),
      classes_(num_classes),
      seed_(seed) {
  ST_CHECK(size > 0 && num_classes > 0, "synthetic: need size > 0 and classes > 0, got ", size,
           " and ", num_classes);
  ST_CHECK(shape.rank() == 3 && shape.numel() > 0, "synthetic: shape must be [C, H, W], got ",
           shape.str());
  channels_ = static_cast<int>(shape[0]);
  height_ = static_cast<int>(shape[1]);
  width_ = static_cast<int>(shape[2]);
  patterns_.resize(static_cast<size_t>(classes_) * channels_ * kGrid * kGrid);
  for (size_t i = 0; i < patterns_.size(); ++i)
    patterns_[i] = static_cast<uint8_t>(64 + (philox_block(seed, kPatternStream, i).v[0] >> 25));
  set_source_shape(channels_, height_, width_);
}

std::string SyntheticDataset::name() const {
  return "synthetic " + std::to_string(size_) + " x [" + std::to_string(channels_) + ", " +
         std::to_string(height_) + ", " + std::to_string(width_) + "], " +
         std::to_string(classes_) + " classes";
}

RawImage SyntheticDataset::load(int64_t index) const {
  check_index(index);
  const size_t n = static_cast<size_t>(channels_) * height_ * width_;
  std::shared_ptr<uint8_t[]> px(new uint8_t[n]);
  // Block 0 of the sample's stream picks the label; blocks 1.. give 16 noise bytes each.
  const auto stream = kSampleStream + (static_cast<uint64_t>(first_ + index) << 1);
  RawImage r;
  r.label = static_cast<int32_t>(philox_block(seed_, stream, 0).v[0] % classes_);
  const uint8_t* pat = patterns_.data() + static_cast<size_t>(r.label) * channels_ * kGrid * kGrid;
  uint8_t noise[16];
  size_t i = 0;
  for (int c = 0; c < channels_; ++c) {
    for (int y = 0; y < height_; ++y) {
      const uint8_t* prow = pat + (c * kGrid + y * kGrid / height_) * kGrid;
      for (int x = 0; x < width_; ++x, ++i) {
        if (i % 16 == 0) {
          Philox4 b = philox_block(seed_, stream, 1 + i / 16);
          std::memcpy(noise, b.v, 16);
        }
        // Pattern in [64, 192) plus noise in [-64, 64): always a valid byte.
        px[i] = static_cast<uint8_t>(prow[x * kGrid / width_] + (noise[i % 16] >> 1) - 64);
      }
    }
  }
  r.view = ImageView::chw(px.get(), channels_, height_, width_);
  r.owner = std::move(px);
  return r;
}

}  // namespace st
