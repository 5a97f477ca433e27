// CudaOps: tensor scope (op_list.h, ST_BULK_SCOPE_OPS): bucket positions and per-tensor
// counts.
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"

namespace st::bulk {

namespace {

using detail::launch;

__global__ void offset_kernel(int32_t* idx, int32_t delta, int64_t n) {
  ST_GRID_STRIDE_LOOP(j, n) idx[j] += delta;
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

}  // namespace

void CudaOps::offset_indices(Buffer& idx, int32_t delta) {
  cuda::DeviceGuard guard(dev());
  launch(idx.size(), cuda::current_stream(dev()), offset_kernel, i32(idx), delta);
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
