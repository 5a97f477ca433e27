// CudaOps: statistics, threshold compaction, exact top-k and unions, on CUB. The plain
// threshold, MiCRO/ExDyna and top-k passes reuse sparsify/kernels/*_cuda.cu; this file adds
// ranges, the candidate-restricted top-k and the union.
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

__global__ void differ_kernel(const uint32_t* a, const uint32_t* b, int32_t* differ, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) {
    if (a[i] != b[i]) *differ = 1;  // any writer; the value is all that matters
  }
}

// counts[s] += 1 for the segment [seg[s], seg[s+1]) holding each position (the last one
// open-ended): an upper_bound over the few segment starts. Integer atomics, so the
// counts do not depend on the order.
__global__ void segment_count_kernel(const int32_t* idx, const int64_t* seg, int nseg,
                                     unsigned long long* counts, int64_t m) {
  ST_GRID_STRIDE_LOOP(j, m) {
    const int64_t p = idx[j];
    int lo = 0, hi = nseg;  // first seg[s] > p
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (seg[mid] <= p)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo > 0) atomicAdd(&counts[lo - 1], 1ull);
  }
}

float key_value(uint32_t key) {
  float v;
  std::memcpy(&v, &key, 4);
  return v;
}

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

int64_t CudaOps::count_abs(const Buffer& x, part::Range r, float tau, bool strict) {
  check::range("count_abs", x.size(), r);
  if (r.size() <= 0) return 0;
  cuda::DeviceGuard guard(dev());
  return select::count_abs_cuda(f32(x) + r.begin, r.size(), tau, strict);
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

void CudaOps::threshold_select(const Buffer& x, part::Range owned, float tau, int64_t t,
                               Buffer& out) {
  check::range("threshold_select", x.size(), owned);
  resize(out, Elem::I32, std::max<int64_t>(1, owned.size()));
  cuda::DeviceGuard guard(dev());
  // Empty partitions give 0; otherwise the passing positions or the one fallback position.
  const int64_t count = select::threshold_select_cuda(f32(x), owned, tau, t, i32(out));
  set_size(out, Elem::I32, count);
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

bool CudaOps::same_bits(const Buffer& a, const Buffer& b) {
  if (a.size() != b.size() || a.elem() != b.elem()) return false;
  if (a.empty()) return true;
  cuda::DeviceGuard guard(dev());
  const cudaStream_t stream = cuda::current_stream(dev());
  detail::Scratch flag(sizeof(int32_t), dev());
  ST_CUDA_CHECK(cudaMemsetAsync(flag.at<int32_t>(0), 0, sizeof(int32_t), stream));
  launch(a.size(), stream, differ_kernel, static_cast<const uint32_t*>(storage(a).raw()),
         static_cast<const uint32_t*>(storage(b).raw()), flag.at<int32_t>(0));
  int32_t differ = 0;
  to_host(flag.at<int32_t>(0), sizeof(int32_t), &differ);
  return differ == 0;
}

std::vector<int64_t> CudaOps::segment_counts(const Buffer& idx, int64_t begin, int64_t count,
                                             const std::vector<int64_t>& segments) {
  ST_CHECK(begin >= 0 && count >= 0 && begin + count <= idx.size(),
           "bulk::CudaOps::segment_counts: [", begin, ", ", begin + count, ") outside a buffer of ",
           idx.size(), " positions");
  std::vector<int64_t> out(segments.size(), 0);
  if (count == 0 || segments.empty()) return out;
  cuda::DeviceGuard guard(dev());
  const cudaStream_t stream = cuda::current_stream(dev());
  const size_t nseg = segments.size(), bytes = 8 * nseg;
  detail::Scratch scratch(2 * detail::align256(bytes), dev());
  auto* seg = scratch.at<int64_t>(0);
  auto* counts = scratch.at<unsigned long long>(detail::align256(bytes));
  ST_CUDA_CHECK(cudaMemcpyAsync(seg, segments.data(), bytes, cudaMemcpyHostToDevice, stream));
  ST_CUDA_CHECK(cudaMemsetAsync(counts, 0, bytes, stream));
  launch(count, stream, segment_count_kernel, i32(idx) + begin, static_cast<const int64_t*>(seg),
         static_cast<int>(nseg), counts);
  std::vector<unsigned long long> host(nseg);
  to_host(counts, bytes, host.data());
  for (size_t s = 0; s < nseg; ++s) out[s] = static_cast<int64_t>(host[s]);
  return out;
}

}  // namespace st::bulk
