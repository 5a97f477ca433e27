// Antialiased bilinear resampling, as PIL's Image.resize(BILINEAR) does it (and so
// torchvision's Resize and RandomResizedCrop): a triangle filter whose support widens
// by the downscale factor, so shrinking averages the covered pixels instead of
// aliasing. Hand-written because Debian's stb_image_resize 0.97 aborts on an assert
// for some sizes (nothings/stb#1449).
#pragma once

#include <cstdint>

#include "data/image.h"

namespace st {

// A rectangle in source pixels (may be fractional).
struct Box {
  double x = 0, y = 0, w = 0, h = 0;
};

// Resamples `box` of src to oh x ow and writes planar CHW bytes (src.channels x oh x ow)
// to out. Filter taps never reach outside src, as PIL renormalises at the borders.
void resize_bilinear(const ImageView& src, const Box& box, int oh, int ow, uint8_t* out);

}  // namespace st
