#include "core/kernels/im2col.h"

#include <cstring>

namespace st::cpu {

namespace {
// Valid output columns [lo, hi) for kernel offset k: those whose input index
// o*stride - pad + k lies inside [0, size).
inline void valid_range(int64_t k, int64_t size, int64_t out, int64_t stride, int64_t pad,
                        int64_t* lo, int64_t* hi) {
  int64_t a = pad - k;  // need o*stride >= a
  *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  int64_t b = size + pad - k;  // need o*stride < b
  *hi = b <= 0 ? 0 : (b + stride - 1) / stride;
  if (*hi > out) *hi = out;
  if (*lo > *hi) *lo = *hi;
}

// Calls fn(c, ky, kx, row offset, oy range, ox range) for every row of the column matrix
// (one per channel and kernel offset): the traversal im2col and col2im share.
template <typename Fn>
void for_each_column_row(const ConvGeometry& g, int64_t ld, Fn fn) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      int64_t oy_lo, oy_hi;
      valid_range(ky, g.h, g.oh, g.sh, g.ph, &oy_lo, &oy_hi);
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        int64_t ox_lo, ox_hi;
        valid_range(kx, g.w, g.ow, g.sw, g.pw, &ox_lo, &ox_hi);
        fn(c, ky, kx, ((c * g.kh + ky) * g.kw + kx) * ld, oy_lo, oy_hi, ox_lo, ox_hi);
      }
    }
}
}  // namespace

void im2col(const float* image, const ConvGeometry& g, float* col, int64_t ld) {
  for_each_column_row(g, ld,
                      [&](int64_t c, int64_t ky, int64_t kx, int64_t at, int64_t oy_lo,
                          int64_t oy_hi, int64_t ox_lo, int64_t ox_hi) {
                        const float* plane = image + c * g.h * g.w;
                        float* row = col + at;
                        std::memset(row, 0, sizeof(float) * oy_lo * g.ow);
                        for (int64_t oy = oy_lo; oy < oy_hi; ++oy) {
                          float* dst = row + oy * g.ow;
                          const float* src = plane + (oy * g.sh - g.ph + ky) * g.w - g.pw + kx;
                          for (int64_t ox = 0; ox < ox_lo; ++ox) dst[ox] = 0.0f;
                          if (g.sw == 1) {
                            std::memcpy(dst + ox_lo, src + ox_lo, sizeof(float) * (ox_hi - ox_lo));
                          } else {
                            for (int64_t ox = ox_lo; ox < ox_hi; ++ox) dst[ox] = src[ox * g.sw];
                          }
                          for (int64_t ox = ox_hi; ox < g.ow; ++ox) dst[ox] = 0.0f;
                        }
                        std::memset(row + oy_hi * g.ow, 0, sizeof(float) * (g.oh - oy_hi) * g.ow);
                      });
}

void col2im(const float* col, const ConvGeometry& g, float* image, int64_t ld) {
  for_each_column_row(g, ld,
                      [&](int64_t c, int64_t ky, int64_t kx, int64_t at, int64_t oy_lo,
                          int64_t oy_hi, int64_t ox_lo, int64_t ox_hi) {
                        float* plane = image + c * g.h * g.w;
                        const float* row = col + at;
                        for (int64_t oy = oy_lo; oy < oy_hi; ++oy) {
                          const float* src = row + oy * g.ow;
                          float* dst = plane + (oy * g.sh - g.ph + ky) * g.w - g.pw + kx;
                          if (g.sw == 1) {
                            for (int64_t ox = ox_lo; ox < ox_hi; ++ox) dst[ox] += src[ox];
                          } else {
                            for (int64_t ox = ox_lo; ox < ox_hi; ++ox) dst[ox * g.sw] += src[ox];
                          }
                        }
                      });
}

}  // namespace st::cpu
