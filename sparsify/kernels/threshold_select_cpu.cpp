#include "sparsify/kernels/threshold_select_cpu.h"

#include "sparsify/kernels/select_cpu.h"

namespace st::select {

int64_t threshold_select_cpu(const float* x, part::Range owned, float tau, int64_t t,
                             std::vector<int32_t>& out) {
  out.clear();
  if (owned.size() <= 0) return 0;
  // The same compaction as select::abs_threshold (one pass, per-thread chunks joined in
  // thread order), on the same key as part::passes.
  compact_abs_ge(x, owned.begin, owned.end, part::abs_key(tau), out);
  if (out.empty()) out.push_back(static_cast<int32_t>(part::fallback_index(owned, t)));
  return static_cast<int64_t>(out.size());
}

}  // namespace st::select
