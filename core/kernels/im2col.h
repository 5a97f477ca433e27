// im2col / col2im for one NCHW image (Chellapilla et al. 2006): unfold every
// kernel-sized patch into a column so a convolution becomes one GEMM.
// col has shape [C*KH*KW, OH*OW]; row (c, ky, kx), column (oy, ox).
#pragma once

#include <cstdint>

namespace st::cpu {

// Rows (h) and columns (w) may differ in kernel, stride and padding: Inception's 1x7 and
// 7x1 convolutions (Szegedy et al. 2016) pad only along their long side.
struct ConvGeometry {
  int64_t c, h, w;  // input channels and size
  int64_t kh, kw;   // kernel
  int64_t sh, sw;   // stride
  int64_t ph, pw;   // zero padding on both sides
  int64_t oh, ow;   // output size
};

// `ld` is the row stride of col (>= OH*OW), so several images can sit side by side
// in one column matrix [C*KH*KW, images*OH*OW] and share one large GEMM.
void im2col(const float* image, const ConvGeometry& g, float* col, int64_t ld);
// Accumulates (+=) the columns back into the image (which the caller zeroes).
void col2im(const float* col, const ConvGeometry& g, float* image, int64_t ld);

}  // namespace st::cpu
