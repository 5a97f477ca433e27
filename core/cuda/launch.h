// Launch geometry for the elementwise kernels: grid-stride loops over int64 indices,
// with the grid capped so huge tensors reuse threads instead of overflowing gridDim.
// Host code (no CUDA headers), so the arithmetic is unit-tested on the CPU
// (tests/core/launch_test.cpp), where a tiny grid makes every loop repeat.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/host_device.h"

namespace st::cuda {

constexpr int kBlock = 256;
constexpr int64_t kMaxGrid = 65535;

// Blocks for n elements: ceil(n / block), at least 1 (a launch needs one), at most
// kMaxGrid (the grid-stride loop covers the rest).
inline unsigned int grid_for(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, kMaxGrid));
}

// The grid-stride loop of thread `thread` in block `block` of a grid of `grid` blocks of
// `dim` threads: it visits first, first + stride, ... below n. Every index in [0, n) is
// visited by exactly one thread, however small the grid.
ST_HD int64_t grid_stride_first(int64_t block, int64_t dim, int64_t thread) {
  return block * dim + thread;
}
ST_HD int64_t grid_stride_step(int64_t grid, int64_t dim) {
  return grid * dim;
}

// Byte sizes of pieces carved from one scratch allocation, rounded up to 256 (the
// alignment cudaMalloc gives and CUB's temporary storage expects).
inline size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

}  // namespace st::cuda

#ifdef __CUDACC__
// for (int64_t i : grid-stride range over [0, n)) inside a kernel.
#define ST_GRID_STRIDE_LOOP(i, n)                                                               \
  for (int64_t i = ::st::cuda::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < (n); \
       i += ::st::cuda::grid_stride_step(gridDim.x, blockDim.x))
#endif
