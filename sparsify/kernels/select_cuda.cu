#include "sparsify/kernels/select_cuda.h"

#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/std/functional>

#include <cstring>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/storage.h"

namespace st::select {

namespace {

// |x| as IEEE bits: non-negative floats order like their bit patterns (as on the CPU).
__host__ __device__ inline uint32_t abs_bits(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v) & 0x7FFFFFFFu;
#else
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u & 0x7FFFFFFFu;
#endif
}

// Strict compares against the next key up, so one >= serves both.
inline uint32_t threshold_key(float tau, bool strict) {
  return abs_bits(tau) + (strict ? 1u : 0u);
}

struct PassesIndex {  // position i passes: |x_i| >= key
  const float* x;
  uint32_t key;
  __device__ bool operator()(int32_t i) const { return abs_bits(x[i]) >= key; }
};

struct PassesValue {  // 1 when |v| >= key, for counting
  uint32_t key;
  __device__ int64_t operator()(float v) const { return abs_bits(v) >= key ? 1 : 0; }
};

__global__ void keys_and_positions(const float* x, int64_t n, uint32_t* keys, int32_t* pos) {
  ST_GRID_STRIDE_LOOP(i, n) {
    keys[i] = abs_bits(x[i]);
    pos[i] = static_cast<int32_t>(i);
  }
}

}  // namespace

int64_t count_abs_cuda(const float* x, int64_t n, float tau, bool strict) {
  if (n <= 0) return 0;
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t stream = cuda::current_stream(dev);
  const PassesValue op{threshold_key(tau, strict)};
  size_t temp_bytes = 0;
  ST_CUDA_CHECK(
      cub::DeviceReduce::TransformReduce(nullptr, temp_bytes, x, static_cast<int64_t*>(nullptr), n,
                                         ::cuda::std::plus<int64_t>{}, op, int64_t{0}, stream));
  const size_t out_offset = cuda::align256(temp_bytes);
  Storage scratch(out_offset + sizeof(int64_t), Device::cuda(dev));
  char* base = static_cast<char*>(scratch.data());
  int64_t* out = reinterpret_cast<int64_t*>(base + out_offset);
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(
      base, temp_bytes, x, out, n, ::cuda::std::plus<int64_t>{}, op, int64_t{0}, stream));
  int64_t count = 0;
  cuda::copy_bytes(&count, Device::cpu(), out, Device::cuda(dev), sizeof(int64_t));
  return count;
}

int64_t abs_threshold_cuda(const float* x, int64_t n, float tau, bool strict, int32_t* out) {
  if (n <= 0) return 0;
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t stream = cuda::current_stream(dev);
  const PassesIndex pred{x, threshold_key(tau, strict)};
  thrust::counting_iterator<int32_t> positions(0);
  size_t temp_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceSelect::If(nullptr, temp_bytes, positions, out,
                                      static_cast<int64_t*>(nullptr), n, pred, stream));
  const size_t out_offset = cuda::align256(temp_bytes);
  Storage scratch(out_offset + sizeof(int64_t), Device::cuda(dev));
  char* base = static_cast<char*>(scratch.data());
  int64_t* count_dev = reinterpret_cast<int64_t*>(base + out_offset);
  ST_CUDA_CHECK(
      cub::DeviceSelect::If(base, temp_bytes, positions, out, count_dev, n, pred, stream));
  int64_t count = 0;
  cuda::copy_bytes(&count, Device::cpu(), count_dev, Device::cuda(dev), sizeof(int64_t));
  return count;
}

float topk_abs_cuda(const float* x, int64_t n, int64_t k, int32_t* out) {
  if (n <= 0 || k <= 0) return 0.0f;
  k = std::min(k, n);
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t stream = cuda::current_stream(dev);
  // Sort (|x| bits, position) pairs by key, descending and stable: the first k are the
  // Top-k with ties to the lower position. Then sort those k positions ascending.
  size_t sort_bytes = 0, sort_k_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, 0, 32, stream));
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, sort_k_bytes,
                                               static_cast<const int32_t*>(nullptr),
                                               static_cast<int32_t*>(nullptr), k, 0, 32, stream));
  const size_t vec = cuda::align256(static_cast<size_t>(n) * 4);
  const size_t temp = cuda::align256(std::max(sort_bytes, sort_k_bytes));
  Storage scratch(4 * vec + temp, Device::cuda(dev));
  char* base = static_cast<char*>(scratch.data());
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(base);
  uint32_t* keys_out = reinterpret_cast<uint32_t*>(base + vec);
  int32_t* pos_in = reinterpret_cast<int32_t*>(base + 2 * vec);
  int32_t* pos_out = reinterpret_cast<int32_t*>(base + 3 * vec);
  void* temp_ptr = base + 4 * vec;
  keys_and_positions<<<cuda::grid_for(n), cuda::kBlock, 0, stream>>>(x, n, keys_in, pos_in);
  ST_CUDA_CHECK_LAUNCH();
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp_ptr, sort_bytes, keys_in, keys_out,
                                                          pos_in, pos_out, n, 0, 32, stream));
  ST_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(temp_ptr, sort_k_bytes, pos_out, out, k, 0, 32, stream));
  uint32_t kth = 0;
  cuda::copy_bytes(&kth, Device::cpu(), keys_out + (k - 1), Device::cuda(dev), sizeof(uint32_t));
  float tau;
  std::memcpy(&tau, &kth, 4);
  return tau;
}

}  // namespace st::select
