// CudaOps: the threshold extras (op_list.h, ST_BULK_THRESHOLD_OPS): counts, MiCRO's
// partition select and the candidate-restricted top-k on CUB and the kernels of
// sparsify/kernels/*_cuda.cu, and SIDCo's multi-stage estimate. The moments are
// sidco::moments_cuda's (sums in double by atomics: the last bits may differ from the CPU's block
// order, as the interface allows); the compaction is select_abs's stable CUB selection, so
// positions and values are exact and ascending.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>

#include <cstring>

#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/kernels/moments_cuda.h"
#include "sparsify/kernels/select_cuda.h"
#include "sparsify/kernels/threshold_select_cuda.h"

namespace st::bulk {

namespace {

using detail::launch;

struct AbsKeyAt {  // |x[candidate]| as its bit pattern
  const float* x;
  __host__ __device__ uint32_t operator()(int32_t i) const { return part::abs_key(x[i]); }
};

struct MinKey {
  __host__ __device__ uint32_t operator()(uint32_t p, uint32_t q) const { return p < q ? p : q; }
};

__global__ void keys_at_kernel(const float* x, const int32_t* cand, uint32_t* keys, int64_t c) {
  ST_GRID_STRIDE_LOOP(j, c) keys[j] = part::abs_key(x[cand[j]]);
}

float key_value(uint32_t key) {
  float v;
  std::memcpy(&v, &key, 4);
  return v;
}

// idx[j] = pos[idx[j]]: positions in an earlier compaction back to bucket positions.
__global__ void map_positions_kernel(const int32_t* pos, int32_t* idx, int64_t m) {
  ST_GRID_STRIDE_LOOP(j, m) idx[j] = pos[idx[j]];
}

}  // namespace

sidco::Moments CudaOps::exceed_moments(const Buffer& x, part::Range r, float tau,
                                       double log_scale) {
  check::range("exceed_moments", x.size(), r);
  if (r.size() <= 0) return sidco::Moments{};
  cuda::DeviceGuard guard(dev());
  return sidco::moments_cuda(f32(x) + r.begin, r.size(), tau, log_scale);
}

sidco::Moments CudaOps::exceed_compact(const Buffer& x, part::Range r, float tau, const Buffer* pos,
                                       Buffer& out_idx, Buffer& out_vals) {
  check::range("exceed_compact", x.size(), r);
  check::positions_cover(pos, r);
  ST_CHECK(tau >= 0, "bulk::Ops::exceed_compact: threshold ", tau, " < 0");
  const sidco::Moments m = exceed_moments(x, r, tau, 0);
  select_abs(x, r, tau, /*strict=*/true, out_idx);  // positions in x, ascending
  gather(x, out_idx, out_vals);
  if (pos) {
    cuda::DeviceGuard guard(dev());
    detail::launch(out_idx.size(), cuda::current_stream(dev()), map_positions_kernel, i32(*pos),
                   i32(out_idx));
  }
  return m;
}

int64_t CudaOps::count_abs(const Buffer& x, part::Range r, float tau, bool strict) {
  check::range("count_abs", x.size(), r);
  if (r.size() <= 0) return 0;
  cuda::DeviceGuard guard(dev());
  return select::count_abs_cuda(f32(x) + r.begin, r.size(), tau, strict);
}

void CudaOps::threshold_select(const Buffer& x, part::Range owned, float tau, int64_t t,
                               Buffer& out) {
  check::range("threshold_select", x.size(), owned);
  resize(out, Elem::I32, std::max<int64_t>(1, owned.size()));
  cuda::DeviceGuard guard(dev());
  // Empty partitions give 0; otherwise the passing positions or the one fallback position.
  const int64_t count = select::threshold_select_cuda(f32(x), owned, tau, t, i32(out));
  set_size(out, Elem::I32, count);
}

// Candidates in ascending order: a stable descending sort of their magnitude keys keeps
// ties in candidate order, so the first k are the top k with ties to the lower position.
float CudaOps::topk_abs_among(const Buffer& x, const Buffer& candidates, int64_t k, Buffer& out) {
  const int64_t c = candidates.size();
  if (k <= 0 || c == 0) {
    resize(out, Elem::I32, 0);
    return 0.0f;
  }
  cuda::DeviceGuard guard(dev());
  const cudaStream_t stream = cuda::current_stream(dev());
  const auto* cand = i32(candidates);
  if (k >= c) {  // every candidate; the threshold is their smallest magnitude
    resize(out, Elem::I32, c);
    copy(candidates, 0, out, 0, c);
    size_t temp = 0;
    ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(nullptr, temp, cand,
                                                     static_cast<uint32_t*>(nullptr), c, MinKey{},
                                                     AbsKeyAt{f32(x)}, 0xFFFFFFFFu, stream));
    const size_t out_at = detail::align256(temp);
    detail::Scratch scratch(out_at + 4, dev());
    ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(scratch.at<void>(0), temp, cand,
                                                     scratch.at<uint32_t>(out_at), c, MinKey{},
                                                     AbsKeyAt{f32(x)}, 0xFFFFFFFFu, stream));
    uint32_t min_key = 0;
    to_host(scratch.at<uint32_t>(out_at), 4, &min_key);
    return key_value(min_key);
  }
  resize(out, Elem::I32, k);
  size_t sort_bytes = 0, pos_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      cand, static_cast<int32_t*>(nullptr), c, 0, 32, stream));
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(
      nullptr, pos_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr), k,
      0, detail::position_bits(x.size()), stream));
  const size_t vec = detail::align256(4 * static_cast<size_t>(c));
  detail::Scratch scratch(3 * vec + std::max(sort_bytes, pos_bytes), dev());
  auto* keys_in = scratch.at<uint32_t>(0);
  auto* keys_out = scratch.at<uint32_t>(vec);
  auto* pos_out = scratch.at<int32_t>(2 * vec);
  void* temp = scratch.at<void>(3 * vec);
  launch(c, stream, keys_at_kernel, f32(x), cand, keys_in);
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp, sort_bytes, keys_in, keys_out, cand,
                                                          pos_out, c, 0, 32, stream));
  // The k winners back in position order (positions are >= 0: unsigned keys).
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(
      temp, pos_bytes, reinterpret_cast<const uint32_t*>(pos_out),
      reinterpret_cast<uint32_t*>(i32(out)), k, 0, detail::position_bits(x.size()), stream));
  uint32_t kth = 0;
  to_host(keys_out + (k - 1), 4, &kth);
  return key_value(kth);
}

}  // namespace st::bulk
