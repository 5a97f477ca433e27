// Copies into, out of and between emulated devices, and their zero fill. Each goes through
// the calling thread's current stream of the emulated device; a copy waits for it
// (cudaMemcpyAsync + cudaStreamSynchronize, as core/cuda's copies do), a zero fill does
// not (cudaMemsetAsync). Inside that device's executor (a task already in stream order)
// both run in place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace st::emu {

class Stream;

// Device memory, from a caching allocator with CUDA's rules (core/caching_allocator.h): a
// block belongs to the stream that allocated it (allocation_stream(), stream.h) and is
// handed out again on that stream at once, on another only once every stream announced
// with record_stream() has passed the point where it was freed. A reused block is filled
// with 0xFF bytes (NaN in every float format, -1 in integers) in its new stream's order,
// so a reader on a stream that was never announced gets poison, not stale values that
// happen to look right.
void* device_alloc(size_t bytes, int device);
void device_free(void* ptr);
// Announces that `s` uses the block holding `ptr` (cuda::record_stream's counterpart).
void record_stream(const void* ptr, Stream& s);
// Blocks handed out again and poisoned since the process started (tests).
int64_t reused_blocks();

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void zero_bytes(void* dst, size_t bytes, int device);

// Page-locked host memory for a process whose device is emulated (host::allocate_pinned
// takes it from here): ordinary aligned memory, allocated apart so that the pinned pool
// and Tensor::pinned() work as with a GPU.
void* pinned_alloc(size_t bytes);
// False (and nothing freed) for a block pinned_alloc did not return.
bool pinned_free(void* ptr);

// Asynchronous host-to-device copies whose source was pageable memory, since the process
// started. On a GPU the driver stages such a copy synchronously, so the overlap the
// uploader exists for is lost without a word; the emulation counts them.
int64_t pageable_async_copies();
void count_pageable_async_copy();

}  // namespace st::emu
