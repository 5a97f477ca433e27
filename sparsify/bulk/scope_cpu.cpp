// CpuOps: tensor scope (--sp scope=tensor; op_list.h, ST_BULK_SCOPE_OPS).
#include <algorithm>

#include "core/error.h"
#include "sparsify/bulk/cpu_common.h"
#include "sparsify/bulk/cpu_ops.h"

namespace st::bulk {

using cpu_detail::kParallelMin;

void CpuOps::offset_indices(Buffer& idx, int32_t delta) {
  int32_t* p = i32(idx);
  const int64_t m = idx.size();
#pragma omp parallel for simd if (m > kParallelMin) schedule(static)
  for (int64_t j = 0; j < m; ++j) p[j] += delta;
}

std::vector<int64_t> CpuOps::segment_counts(const Buffer& idx, int64_t begin, int64_t count,
                                            const std::vector<int64_t>& segments) {
  ST_CHECK(!segments.empty() && segments.front() == 0,
           "bulk::Ops::segment_counts: segments must start at 0");
  std::vector<int64_t> out(segments.size(), 0);
  const int32_t* p = i32(idx);
  for (int64_t j = begin; j < begin + count; ++j) {
    const auto it = std::upper_bound(segments.begin(), segments.end(), static_cast<int64_t>(p[j]));
    ++out[static_cast<size_t>(it - segments.begin()) - 1];
  }
  return out;
}

}  // namespace st::bulk
