// Launch geometry for the elementwise kernels: grid-stride loops over int64 indices,
// with the grid capped so huge tensors reuse threads instead of overflowing gridDim.
#pragma once

#include <algorithm>
#include <cstdint>

namespace st::cuda {

constexpr int kBlock = 256;
constexpr int64_t kMaxGrid = 65535;

inline unsigned int grid_for(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, kMaxGrid));
}

}  // namespace st::cuda

#ifdef __CUDACC__
// for (int64_t i : grid-stride range over [0, n)) inside a kernel.
#define ST_GRID_STRIDE_LOOP(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
#endif
