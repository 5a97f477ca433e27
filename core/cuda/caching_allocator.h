// The process-wide caching allocator of CUDA device memory (the caching logic is
// core/caching_allocator.h, shared with the emulated device's memory).
#pragma once

#include "core/caching_allocator.h"

namespace st::cuda {

using st::AllocatorStats;
using st::CachingAllocator;
using st::RawAllocator;

// The process-wide allocator behind st::cuda::device_alloc / device_free (storage.h).
// (record_stream for tensors is in core/cuda/stream.h.)
CachingAllocator& caching_allocator();
AllocatorStats memory_stats(int device);
void empty_cache();

}  // namespace st::cuda
