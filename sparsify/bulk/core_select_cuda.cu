// CudaOps: the core's statistics, threshold compaction, exact top-k, unions and index
// bounds, on CUB. The threshold and top-k passes reuse sparsify/kernels/select_cuda.cu;
// this file adds ranges and the union.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <cstring>

#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/kernels/select_cuda.h"
#include "sparsify/kernels/threshold_select_cuda.h"

namespace st::bulk {

namespace {

using detail::launch;

// One pass of stats(): sums in double, the largest |x| as a float.
struct StatsAcc {
  double sum, sum_sq, abs_sum;
  float abs_max;
};

struct ToStats {
  __host__ __device__ StatsAcc operator()(float v) const {
    const double d = v;
    const float a = fabsf(v);
    return {d, d * d, static_cast<double>(a), a};
  }
};

struct AddStats {
  __host__ __device__ StatsAcc operator()(const StatsAcc& p, const StatsAcc& q) const {
    return {p.sum + q.sum, p.sum_sq + q.sum_sq, p.abs_sum + q.abs_sum, fmaxf(p.abs_max, q.abs_max)};
  }
};

struct Bounds {
  int32_t lo, hi;
};
struct ToBounds {
  __host__ __device__ Bounds operator()(int32_t v) const { return {v, v}; }
};
struct JoinBounds {
  __host__ __device__ Bounds operator()(const Bounds& p, const Bounds& q) const {
    return {p.lo < q.lo ? p.lo : q.lo, p.hi > q.hi ? p.hi : q.hi};
  }
};

}  // namespace

// --- Statistics ---

Stats CudaOps::stats(const Buffer& x, part::Range r) {
  check::range("stats", x.size(), r);
  Stats s;
  s.count = r.size();
  if (r.size() <= 0) return s;
  cuda::DeviceGuard guard(dev());
  const cudaStream_t stream = cuda::current_stream(dev());
  const float* p = f32(x) + r.begin;
  const StatsAcc zero{0, 0, 0, 0.0f};
  size_t temp = 0;
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(nullptr, temp, p,
                                                   static_cast<StatsAcc*>(nullptr), r.size(),
                                                   AddStats{}, ToStats{}, zero, stream));
  const size_t out_at = detail::align256(temp);
  detail::Scratch scratch(out_at + sizeof(StatsAcc), dev());
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(scratch.at<void>(0), temp, p,
                                                   scratch.at<StatsAcc>(out_at), r.size(),
                                                   AddStats{}, ToStats{}, zero, stream));
  StatsAcc acc{};
  to_host(scratch.at<StatsAcc>(out_at), sizeof(StatsAcc), &acc);
  s.sum = acc.sum;
  s.sum_sq = acc.sum_sq;
  s.abs_sum = acc.abs_sum;
  s.abs_max = acc.abs_max;
  return s;
}

// --- Selection ---

void CudaOps::select_abs(const Buffer& x, part::Range r, float tau, bool strict, Buffer& out) {
  check::range("select_abs", x.size(), r);
  resize(out, Elem::I32, r.size());
  if (r.size() <= 0) return;
  cuda::DeviceGuard guard(dev());
  const int64_t count =
      select::abs_threshold_cuda(f32(x) + r.begin, r.size(), tau, strict, i32(out));
  set_size(out, Elem::I32, count);
  if (r.begin != 0) offset_indices(out, static_cast<int32_t>(r.begin));
}

float CudaOps::topk_abs(const Buffer& x, part::Range r, int64_t k, Buffer& out) {
  check::range("topk_abs", x.size(), r);
  const int64_t n = r.size();
  if (k <= 0 || n <= 0) {
    resize(out, Elem::I32, 0);
    return 0.0f;
  }
  if (k >= n) {  // everything, threshold 0 (select::topk_abs)
    iota(out, n, static_cast<int32_t>(r.begin));
    return 0.0f;
  }
  resize(out, Elem::I32, k);
  cuda::DeviceGuard guard(dev());
  const float tau = select::topk_abs_cuda(f32(x) + r.begin, n, k, i32(out));
  if (r.begin != 0) offset_indices(out, static_cast<int32_t>(r.begin));
  return tau;
}

// --- Union: the segments side by side, sorted, duplicates dropped: ascending positions ---

void CudaOps::union_of(const Buffer& all, const std::vector<int64_t>& offsets,
                       const std::vector<int64_t>& counts, int64_t domain, Buffer& out) {
  ST_CHECK(offsets.size() == counts.size(), "bulk::CudaOps::union_of: ", offsets.size(),
           " offsets for ", counts.size(), " counts");
  int64_t m = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    ST_CHECK(offsets[r] >= 0 && counts[r] >= 0 && offsets[r] + counts[r] <= all.size(),
             "bulk::CudaOps::union_of: rank ", r, "'s segment [", offsets[r], ", ",
             offsets[r] + counts[r], ") outside ", all.size(), " entries");
    m += counts[r];
  }
  resize(out, Elem::I32, m);
  if (m == 0) return;
  cuda::DeviceGuard guard(dev());
  const cudaStream_t stream = cuda::current_stream(dev());
  const int bits = detail::position_bits(domain);
  size_t sort_bytes = 0, unique_bytes = 0;
  ST_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr),
                                     static_cast<uint32_t*>(nullptr), m, 0, bits, stream));
  ST_CUDA_CHECK(cub::DeviceSelect::Unique(
      nullptr, unique_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<int64_t*>(nullptr), m, stream));
  const size_t vec = detail::align256(4 * static_cast<size_t>(m));
  const size_t count_at = 2 * vec + detail::align256(std::max(sort_bytes, unique_bytes));
  detail::Scratch scratch(count_at + sizeof(int64_t), dev());
  auto* joined = scratch.at<uint32_t>(0);
  auto* sorted = scratch.at<uint32_t>(vec);
  void* temp = scratch.at<void>(2 * vec);
  int64_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > 0)
      ST_CUDA_CHECK(cudaMemcpyAsync(joined + at, i32(all) + offsets[r], 4 * counts[r],
                                    cudaMemcpyDeviceToDevice, stream));
    at += counts[r];
  }
  ST_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(temp, sort_bytes, joined, sorted, m, 0, bits, stream));
  ST_CUDA_CHECK(cub::DeviceSelect::Unique(temp, unique_bytes, sorted,
                                          reinterpret_cast<uint32_t*>(i32(out)),
                                          scratch.at<int64_t>(count_at), m, stream));
  int64_t distinct = 0;
  to_host(scratch.at<int64_t>(count_at), sizeof(int64_t), &distinct);
  set_size(out, Elem::I32, distinct);
}

// --- Host-valued checks of the exchange (index bounds, equality, per-segment counts) ---

IndexBounds CudaOps::index_bounds(const Buffer& idx) {
  IndexBounds out;
  const int64_t m = idx.size();
  if (m == 0) return out;
  cuda::DeviceGuard guard(dev());
  const cudaStream_t stream = cuda::current_stream(dev());
  const Bounds init{INT32_MAX, INT32_MIN};
  size_t temp = 0;
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(nullptr, temp, i32(idx),
                                                   static_cast<Bounds*>(nullptr), m, JoinBounds{},
                                                   ToBounds{}, init, stream));
  const size_t out_at = detail::align256(temp);
  detail::Scratch scratch(out_at + sizeof(Bounds), dev());
  ST_CUDA_CHECK(cub::DeviceReduce::TransformReduce(scratch.at<void>(0), temp, i32(idx),
                                                   scratch.at<Bounds>(out_at), m, JoinBounds{},
                                                   ToBounds{}, init, stream));
  Bounds b{};
  to_host(scratch.at<Bounds>(out_at), sizeof(Bounds), &b);
  out.min = b.lo;
  out.max = b.hi;
  return out;
}

}  // namespace st::bulk
