// CudaOps: the threshold family's extra passes (SIDCo's multi-stage estimate). The
// moments are sidco::moments_cuda's (sums in double by atomics: the last bits may differ
// from the CPU's block order, as the interface allows); the compaction is select_abs's
// stable CUB selection, so positions and values are exact and ascending.
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"
#include "sparsify/kernels/quantize_cuda.h"

namespace st::bulk {

namespace {

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

}  // namespace st::bulk
