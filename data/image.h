// Decoded 8-bit images as strided views, so CIFAR's planar CHW records, MNIST's
// single plane and stb_image's interleaved HWC output are all read in place.
#pragma once

#include <cstdint>
#include <memory>

namespace st {

struct ImageView {
  const uint8_t* data = nullptr;
  int channels = 0, height = 0, width = 0;
  int64_t cstride = 0, ystride = 0, xstride = 0;  // in bytes (= elements)

  uint8_t at(int c, int y, int x) const { return data[c * cstride + y * ystride + x * xstride]; }
  bool interleaved() const { return xstride == channels && cstride == 1; }
  bool planar() const { return xstride == 1; }

  static ImageView chw(const uint8_t* p, int c, int h, int w) {
    return {p, c, h, w, int64_t{h} * w, w, 1};
  }
  static ImageView hwc(const uint8_t* p, int c, int h, int w) {
    return {p, c, h, w, 1, int64_t{w} * c, c};
  }
};

// A view plus whatever keeps its pixels alive: nothing for datasets held in memory,
// the decoder's buffer for a JPEG.
struct RawImage {
  ImageView view;
  int32_t label = 0;
  std::shared_ptr<const void> owner;
};

}  // namespace st
