#include "data/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace st {
namespace {

// Filter taps along one axis: output i reads `count[i]` inputs from `first[i]` with
// weights w[i * width ..], which sum to 1.
struct Taps {
  std::vector<int> first, count;
  std::vector<float> w;
  int width = 0;
};

// PIL's precompute_coeffs (Resample.c) for the bilinear (triangle, support 1) filter.
Taps make_taps(int in_size, double start, double length, int out_size) {
  const double scale = length / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;
  Taps t;
  t.width = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.w.assign(static_cast<size_t>(out_size) * t.width, 0.0f);
  std::vector<double> k(t.width);
  for (int i = 0; i < out_size; ++i) {
    const double center = start + (i + 0.5) * scale;
    // (int) truncates toward zero, as in PIL; both ends are then clamped to the image.
    int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    int n = std::min(std::max(hi - lo, 0), t.width);
    double sum = 0;
    for (int j = 0; j < n; ++j) {
      double d = std::abs((j + lo - center + 0.5) / filter_scale);
      k[j] = d < 1.0 ? 1.0 - d : 0.0;
      sum += k[j];
    }
    ST_CHECK(n > 0 && sum > 0, "resize: output pixel ", i, " has no input pixels (box ", start,
             " + ", length, " of ", in_size, ")");
    t.first[i] = lo;
    t.count[i] = n;
    for (int j = 0; j < n; ++j)
      t.w[static_cast<size_t>(i) * t.width + j] = static_cast<float>(k[j] / sum);
  }
  return t;
}

// Resamples rows [r0, r1) of src along x into planar tmp [C][r1 - r0][ow]. kC = 3 and 1
// unroll the channels of RGB-interleaved and single-plane images (one pass over each
// source row); kC = 0 handles any layout, a channel at a time. Each row's span is
// widened to floats first, in a loop that vectorises, so the taps are pure FMAs.
template <int kC>
void horizontal_pass(const ImageView& src, const Taps& tx, int r0, int r1, int ow, float* tmp) {
  const int rows = r1 - r0;
  const size_t plane = static_cast<size_t>(rows) * ow;
  constexpr int channels = kC > 0 ? kC : 1;
  const int passes = kC > 0 ? 1 : src.channels;
  const int64_t xs = kC > 0 ? kC : src.xstride;
  const int x0 = tx.first.front(), x1 = tx.first.back() + tx.count.back();
  std::vector<float> span(static_cast<size_t>(x1 - x0) * channels);
  const int64_t n = static_cast<int64_t>(span.size());
  for (int c0 = 0; c0 < passes; ++c0) {
    for (int r = r0; r < r1; ++r) {
      const uint8_t* row = src.data + c0 * src.cstride + r * src.ystride + x0 * xs;
      if (kC > 0 || xs == 1) {
        for (int64_t i = 0; i < n; ++i) span[i] = row[i];
      } else {
        for (int64_t i = 0; i < n; ++i) span[i] = row[i * xs];
      }
      float* t = tmp + c0 * plane + static_cast<size_t>(r - r0) * ow;
      for (int x = 0; x < ow; ++x) {
        const float* w = tx.w.data() + static_cast<size_t>(x) * tx.width;
        const float* p = span.data() + static_cast<size_t>(tx.first[x] - x0) * channels;
        float s[channels] = {};
        for (int j = 0; j < tx.count[x]; ++j, p += channels)
          for (int c = 0; c < channels; ++c) s[c] += w[j] * p[c];
        for (int c = 0; c < channels; ++c) t[c * plane + x] = s[c];
      }
    }
  }
}

}  // namespace

void resize_bilinear(const ImageView& src, const Box& box, int oh, int ow, uint8_t* out) {
  ST_CHECK(oh > 0 && ow > 0 && box.w > 0 && box.h > 0, "resize: empty box or output (", box.w, "x",
           box.h, " to ", ow, "x", oh, ")");
  const Taps tx = make_taps(src.width, box.x, box.w, ow);
  const Taps ty = make_taps(src.height, box.y, box.h, oh);
  // Horizontal pass over only the rows the vertical pass reads, into planar floats.
  const int r0 = ty.first.front(), r1 = ty.first.back() + ty.count.back();
  const int rows = r1 - r0;
  std::vector<float> tmp(static_cast<size_t>(src.channels) * rows * ow);
  if (src.interleaved() && src.channels == 3) {
    horizontal_pass<3>(src, tx, r0, r1, ow, tmp.data());
  } else if (src.channels == 1) {
    horizontal_pass<1>(src, tx, r0, r1, ow, tmp.data());
  } else {
    horizontal_pass<0>(src, tx, r0, r1, ow, tmp.data());
  }
  // Vertical pass, row by row so the inner loop runs over contiguous x.
  std::vector<float> acc(ow);
  for (int c = 0; c < src.channels; ++c) {
    const float* plane = tmp.data() + static_cast<size_t>(c) * rows * ow;
    for (int y = 0; y < oh; ++y) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      const float* w = ty.w.data() + static_cast<size_t>(y) * ty.width;
      for (int j = 0; j < ty.count[y]; ++j) {
        const float* t = plane + static_cast<size_t>(ty.first[y] + j - r0) * ow;
        for (int x = 0; x < ow; ++x) acc[x] += w[j] * t[x];
      }
      uint8_t* o = out + (static_cast<size_t>(c) * oh + y) * ow;
      for (int x = 0; x < ow; ++x)
        o[x] = static_cast<uint8_t>(std::clamp(acc[x] + 0.5f, 0.0f, 255.0f));
    }
  }
}

}  // namespace st
