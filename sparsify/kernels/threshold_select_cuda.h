// MiCRO / ExDyna selection on the GPU (Yoon & Oh, HiPC 2023; CCGrid 2024): the positions
// of the owned partition with |x| >= tau, by CUB's DeviceSelect::If over a counting
// iterator with the predicate shared with the CPU (part::passes), so both backends
// select exactly the same set. Built with the CUDA backend only.
#pragma once

#include <cstdint>

#include "sparsify/partition_math.h"

namespace st::select {

// x: the bucket on a CUDA device; out: device memory with room for max(1, owned.size())
// int32 positions. Writes the selected positions in increasing order and returns their
// count; when none passes writes part::fallback_index(owned, t) and returns 1 (0 for an
// empty partition). Runs on the device's current stream and waits for the count.
int64_t threshold_select_cuda(const float* x, part::Range owned, float tau, int64_t t,
                              int32_t* out);

}  // namespace st::select
