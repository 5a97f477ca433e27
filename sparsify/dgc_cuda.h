// The CUDA body of DGC's momentum correction (the pass in sparsify/dgc.cpp). Device
// pointers on one device; runs on that device's current stream. Built with CUDA only.
#pragma once

#include <cstdint>

namespace st::dgc {

// u = m u + (x - seen); v = v + u; seen = x over n elements.
void momentum_cuda(float m, const float* x, int64_t n, float* u, float* v, float* seen);

}  // namespace st::dgc
