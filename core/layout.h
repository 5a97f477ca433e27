// Conversions between the plain NCHW layout and the 16-channel blocked one (nChw16c,
// Tensor's Layout::Blocked16). oneDNN's AVX-512 convolutions compute in the blocked layout;
// a convolution that reads and writes it directly skips the two reorders it would otherwise
// run per call (about 15% of a ResNet-20 training step on a 2-core AVX-512 machine). The
// per-channel and elementwise layers between convolutions read it too; every other layer
// receives plain tensors (Layer::forward and backward convert for it).
#pragma once

#include "core/tensor.h"

namespace st {

// Can `t` be held blocked: a float32 or bfloat16 [N, C, H, W] with C a multiple of 16, on
// the host or an emulated device.
bool blockable16(const Tensor& t);

// Where the hw values of channel c of image n lie in a [N, channels, hw] tensor held in
// `layout`: value k at start + k * step (plain: one contiguous plane; blocked: every 16th
// float of the channel's block).
struct ChannelWalk {
  int64_t start, step;
};
inline ChannelWalk channel_walk(Layout layout, int64_t n, int64_t c, int64_t channels, int64_t hw) {
  if (layout == Layout::Plain) return {(n * channels + c) * hw, 1};
  return {(n * (channels / 16) + c / 16) * hw * 16 + c % 16, 16};
}

// `t` in `layout`: `t` itself when it is already there, else a converted copy.
Tensor to_layout(const Tensor& t, Layout layout);
inline Tensor to_plain(const Tensor& t) {
  return to_layout(t, Layout::Plain);
}

}  // namespace st
