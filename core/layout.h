// Conversions between the plain NCHW layout and the 16-channel blocked one (nChw16c,
// Tensor's Layout::Blocked16). oneDNN's AVX-512 convolutions compute in the blocked layout;
// a convolution that reads and writes it directly skips the two reorders it would otherwise
// run per call (about 15% of a ResNet-20 training step on a 2-core AVX-512 machine). The
// per-channel and elementwise layers between convolutions read it too; every other layer
// receives plain tensors (Layer::forward and backward convert for it).
#pragma once

#include "core/tensor.h"

namespace st {

// Can `t` be held blocked: a float [N, C, H, W] with C a multiple of 16, on the host or
// an emulated device.
bool blockable16(const Tensor& t);

// `t` in `layout`: `t` itself when it is already there, else a converted copy.
Tensor to_layout(const Tensor& t, Layout layout);
inline Tensor to_plain(const Tensor& t) {
  return to_layout(t, Layout::Plain);
}

}  // namespace st
