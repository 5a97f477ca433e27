// Host memory for CPU tensors: 64-byte aligned, with a cache of freed large blocks.
// Every training step allocates the same activation sizes again; without the cache each
// of them is a fresh mmap whose pages fault in (measured: ~12% of a ResNet-20 step).
//
// Pinned (page-locked) blocks are a second pool for the input the GPU copies from: only
// from page-locked memory does cudaMemcpyAsync run as DMA without the CPU, overlapping
// compute. They come from cudaHostAlloc (portable to every device) and are cached the
// same way, since cudaHostAlloc is slow and cudaFreeHost waits for the whole device. A
// process on the emulated device takes its page-locked blocks from the emulation
// (core/emu/memory.h); otherwise a build without CUDA has none (allocate_pinned throws).
#pragma once

#include <cstddef>

namespace st::host {

void* allocate(size_t bytes);
void release(void* ptr, size_t bytes);
// Page-locked memory (see above); release_pinned returns it to its own cache.
void* allocate_pinned(size_t bytes);
void release_pinned(void* ptr, size_t bytes);
// Returns every cached block (pageable and pinned) to the system.
void empty_cache();

struct Stats {
  size_t in_use = 0;  // bytes handed out and not yet released
  size_t cached = 0;  // bytes kept for reuse
  size_t peak_in_use = 0;
};
Stats stats();
Stats pinned_stats();

}  // namespace st::host
