// Copies into, out of and between emulated devices, and their zero fill. Each goes through
// the calling thread's current stream of the emulated device and waits for it
// (cudaMemcpyAsync + cudaStreamSynchronize); inside that device's executor (a task
// already in stream order) it runs in place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace st::emu {

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
