// The quantisation family's kernels (bulk/quant_cuda.cu; op_list.h, ST_BULK_QUANT_OPS).
#include "sparsify/kernels/quant_cuda.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/rng.h"
#include "core/storage.h"

namespace st {

namespace {

// ---- Quantisers ----

// Group g's range: fixed chunks, or the start offsets in `starts` (G of them).
struct Groups {
  int64_t n, chunk, count;
  const int64_t* starts;  // device, when chunk == 0 and count > 1
  __device__ int64_t begin(int64_t g) const {
    return chunk > 0 ? g * chunk : (starts ? starts[g] : 0);
  }
  __device__ int64_t end(int64_t g) const {
    if (chunk > 0) return min(n, (g + 1) * chunk);
    return starts && g + 1 < count ? starts[g + 1] : n;
  }
  // The group of element i (binary search over the starts).
  __device__ int64_t of(int64_t i) const {
    if (chunk > 0) return i / chunk;
    if (!starts) return 0;
    int64_t lo = 0, hi = count - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (starts[mid] <= i) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
};

// One block per group: the group's scale from double sums (QSGD: sqrt of the squares;
// TernGrad: terngrad_scale; Sign: the L1 mean).
__global__ void group_scale_kernel(const float* x, Groups g, bulk::QuantKind kind, float clip,
                                   float* scales) {
  __shared__ double part_a[cuda::kBlock], part_b[cuda::kBlock];
  __shared__ float part_max[cuda::kBlock];
  const int64_t grp = blockIdx.x, b = g.begin(grp), e = g.end(grp);
  double sa = 0, sb = 0;
  float mx = 0.0f;
  for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
    const float v = x[i];
    if (kind == bulk::QuantKind::Qsgd) {
      sa += static_cast<double>(v) * v;
    } else if (kind == bulk::QuantKind::TernGrad) {
      sa += v;
      sb += static_cast<double>(v) * v;
      mx = fmaxf(mx, fabsf(v));
    } else {
      sa += fabsf(v);
    }
  }
  part_a[threadIdx.x] = sa;
  part_b[threadIdx.x] = sb;
  part_max[threadIdx.x] = mx;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      part_a[threadIdx.x] += part_a[threadIdx.x + s];
      part_b[threadIdx.x] += part_b[threadIdx.x + s];
      part_max[threadIdx.x] = fmaxf(part_max[threadIdx.x], part_max[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (kind == bulk::QuantKind::Qsgd) {
    scales[grp] = static_cast<float>(sqrt(part_a[0]));
  } else if (kind == bulk::QuantKind::TernGrad) {
    scales[grp] = quant::terngrad_scale(part_max[0], part_a[0], part_b[0], e - b, clip);
  } else {
    scales[grp] = e > b ? static_cast<float>(part_a[0] / static_cast<double>(e - b)) : 0.0f;
  }
}

__global__ void quantize_kernel(const float* x, Groups g, bulk::QuantKind kind, int32_t levels,
                                int bits, uint64_t seed, uint64_t stream, const float* scales,
                                uint32_t* codes, float* values) {
  ST_GRID_STRIDE_LOOP(i, g.n) {
    const float s = scales[g.of(i)];
    const float u = kind == bulk::QuantKind::Sign ? 0.0f : philox_uniform(seed, stream, i);
    if (kind == bulk::QuantKind::Qsgd) {
      const int32_t l = quant::qsgd_level(x[i], s, levels, u);
      codes[i] = quant::level_code(l, bits);
      values[i] = quant::qsgd_value(l, s, levels);
    } else if (kind == bulk::QuantKind::TernGrad) {
      const int32_t l = quant::terngrad_level(x[i], s, u);
      codes[i] = quant::level_code(l, 2);
      values[i] = quant::terngrad_value(l, s);
    } else {
      const bool neg = x[i] < 0;
      codes[i] = neg ? 1u : 0u;
      values[i] = neg ? -s : s;
    }
  }
}

__global__ void dequantize_kernel(const uint32_t* codes, Groups g, bulk::QuantKind kind,
                                  int32_t levels, int bits, const uint32_t* scale_words,
                                  float* values) {
  ST_GRID_STRIDE_LOOP(i, g.n) {
    const float s = __uint_as_float(scale_words[g.of(i)]);
    if (kind == bulk::QuantKind::Qsgd) {
      values[i] = quant::qsgd_value(quant::code_level(codes[i], bits), s, levels);
    } else if (kind == bulk::QuantKind::TernGrad) {
      values[i] = quant::terngrad_value(quant::code_level(codes[i], 2), s);
    } else {
      values[i] = codes[i] & 1u ? -s : s;
    }
  }
}

// ---- Bit packing: 32 codes of `bits` bits fill exactly `bits` words, so each thread
// packs one group of 32 codes; unpacking reads each code's (at most two) words. ----

__global__ void pack_bits_kernel(const uint32_t* codes, int64_t n, int bits, uint32_t* words) {
  const uint32_t mask = static_cast<uint32_t>((1ull << bits) - 1);
  ST_GRID_STRIDE_LOOP(g, (n + 31) / 32) {
    const int64_t end = min(n, (g + 1) * 32);
    uint32_t* dst = words + g * bits;
    unsigned long long acc = 0;
    int fill = 0;
    for (int64_t j = g * 32; j < end; ++j) {
      acc |= static_cast<unsigned long long>(codes[j] & mask) << fill;
      fill += bits;
      if (fill >= 32) {
        *dst++ = static_cast<uint32_t>(acc);
        acc >>= 32;
        fill -= 32;
      }
    }
    if (fill > 0) *dst = static_cast<uint32_t>(acc);
  }
}

__global__ void unpack_bits_kernel(const uint32_t* words, int64_t n, int bits, uint32_t* codes) {
  const uint32_t mask = static_cast<uint32_t>((1ull << bits) - 1);
  ST_GRID_STRIDE_LOOP(j, n) {
    const int64_t at = j * bits, w = at / 32;
    const int off = static_cast<int>(at % 32);
    unsigned long long acc = words[w] >> off;
    if (off + bits > 32) acc |= static_cast<unsigned long long>(words[w + 1]) << (32 - off);
    codes[j] = static_cast<uint32_t>(acc) & mask;
  }
}

// ---- Range-based float, smallest magnitude ----

__global__ void range_float_kernel(const float* v, int64_t n, quant::RangeFloat f, uint32_t* codes,
                                   float* value) {
  ST_GRID_STRIDE_LOOP(i, n) {
    const uint32_t c = quant::range_float_encode(f, v[i]);
    codes[i] = c;
    value[i] = quant::range_float_decode(f, c);
  }
}

__global__ void range_float_decode_kernel(const uint32_t* codes, int64_t n, quant::RangeFloat f,
                                          float* value) {
  ST_GRID_STRIDE_LOOP(i, n) {
    value[i] = quant::range_float_decode(f, codes[i]);
  }
}

// Non-negative floats order like their bits: the smallest non-zero |x| by atomicMin.
__global__ void abs_min_nonzero_kernel(const float* x, int64_t n, unsigned int* min_bits) {
  unsigned int mn = 0x7F800000u;  // +inf
  ST_GRID_STRIDE_LOOP(i, n) {
    const unsigned int b = __float_as_uint(x[i]) & 0x7FFFFFFFu;
    if (b != 0 && b < mn) mn = b;
  }
  for (int off = 16; off > 0; off >>= 1) mn = min(mn, __shfl_down_sync(0xffffffffu, mn, off));
  if ((threadIdx.x & 31) == 0) atomicMin(min_bits, mn);
}

}  // namespace

namespace quant {

namespace {

// The groups of q on the device: the start offsets are uploaded when given.
struct DeviceGroups {
  Groups g{};
  std::unique_ptr<Storage> starts;
  DeviceGroups(const bulk::QuantSpec& q, int64_t n, const cuda::OnDeviceOf& on) {
    g.n = n;
    g.chunk = q.chunk;
    g.count = q.groups(n);
    g.starts = nullptr;
    if (q.chunk <= 0 && q.starts.size() > 1) {
      starts = std::make_unique<Storage>(8 * q.starts.size(), Device::cuda(on.dev));
      ST_CUDA_CHECK(cudaMemcpyAsync(starts->data(), q.starts.data(), 8 * q.starts.size(),
                                    cudaMemcpyHostToDevice, on.stream));
      ST_CUDA_CHECK(cudaStreamSynchronize(on.stream));  // the host vector may go away
      g.starts = static_cast<const int64_t*>(starts->data());
    }
  }
};

}  // namespace

void quantize_cuda(const bulk::QuantSpec& q, const float* x, int64_t n, float* scales,
                   uint32_t* codes, float* values) {
  if (n <= 0) return;
  cuda::OnDeviceOf on(x);
  const DeviceGroups dg(q, n, on);
  group_scale_kernel<<<static_cast<unsigned>(dg.g.count), cuda::kBlock, 0, on.stream>>>(
      x, dg.g, q.kind, q.clip, scales);
  ST_CUDA_CHECK_LAUNCH();
  quantize_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, on.stream>>>(
      x, dg.g, q.kind, q.levels, q.bits(), q.seed, q.stream, scales, codes, values);
  ST_CUDA_CHECK_LAUNCH();
  ST_CUDA_CHECK(cudaStreamSynchronize(on.stream));  // before dg's start offsets go
}

void dequantize_cuda(const bulk::QuantSpec& q, const uint32_t* codes, int64_t n,
                     const uint32_t* scale_words, float* values) {
  if (n <= 0) return;
  cuda::OnDeviceOf on(codes);
  const DeviceGroups dg(q, n, on);
  dequantize_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, on.stream>>>(
      codes, dg.g, q.kind, q.levels, q.bits(), scale_words, values);
  ST_CUDA_CHECK_LAUNCH();
  ST_CUDA_CHECK(cudaStreamSynchronize(on.stream));
}

void pack_bits_cuda(const uint32_t* codes, int64_t n, int bits, uint32_t* words) {
  if (n <= 0) return;
  cuda::OnDeviceOf on(words);
  pack_bits_kernel<<<cuda::grid_for((n + 31) / 32), cuda::kBlock, 0, on.stream>>>(codes, n, bits,
                                                                                  words);
  ST_CUDA_CHECK_LAUNCH();
}

void unpack_bits_cuda(const uint32_t* words, int64_t n, int bits, uint32_t* codes) {
  if (n <= 0) return;
  cuda::OnDeviceOf on(words);
  unpack_bits_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, on.stream>>>(words, n, bits, codes);
  ST_CUDA_CHECK_LAUNCH();
}

void range_float_cuda(const float* v, int64_t n, RangeFloat f, uint32_t* codes, float* value) {
  if (n <= 0) return;
  cuda::OnDeviceOf on(v);
  range_float_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, on.stream>>>(v, n, f, codes, value);
  ST_CUDA_CHECK_LAUNCH();
}

void range_float_decode_cuda(const uint32_t* codes, int64_t n, RangeFloat f, float* value) {
  if (n <= 0) return;
  cuda::OnDeviceOf on(codes);
  range_float_decode_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, on.stream>>>(codes, n, f, value);
  ST_CUDA_CHECK_LAUNCH();
}

float abs_min_nonzero_cuda(const float* x, int64_t n) {
  if (n <= 0) return 0.0f;
  cuda::OnDeviceOf on(x);
  Storage acc(sizeof(unsigned int), Device::cuda(on.dev));
  const unsigned int init = 0x7F800000u;
  cuda::copy_bytes(acc.data(), Device::cuda(on.dev), &init, Device::cpu(), sizeof(init));
  abs_min_nonzero_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, on.stream>>>(
      x, n, static_cast<unsigned int*>(acc.data()));
  ST_CUDA_CHECK_LAUNCH();
  ST_CUDA_CHECK(cudaStreamSynchronize(on.stream));
  unsigned int bits = 0;
  cuda::copy_bytes(&bits, Device::cpu(), acc.data(), Device::cuda(on.dev), sizeof(bits));
  if (bits == 0x7F800000u) return 0.0f;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

}  // namespace quant

}  // namespace st
