// MiCRO / ExDyna selection on the CPU (Yoon & Oh, HiPC 2023; CCGrid 2024): the positions
// of the owned partition with |x| >= tau in one streaming pass. The compare is the shared
// part::passes (|x| as IEEE bits against tau's bits) and the compaction is
// select::compact_abs_ge (SIMD compare and compress per thread), so at MiCRO's densities
// the pass costs about what reading the partition costs. Same result as select::abs_threshold and
// as the CUDA kernel (threshold_select_cuda.h), independent of the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsify/partition_math.h"

namespace st::select {

// Writes the selected positions of `owned` in increasing order to `out` and returns their
// count; when none passes writes part::fallback_index(owned, t) and returns 1 (0 for an
// empty partition).
int64_t threshold_select_cpu(const float* x, part::Range owned, float tau, int64_t t,
                             std::vector<int32_t>& out);

}  // namespace st::select
