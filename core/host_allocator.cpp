#include "core/host_allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "core/device.h"
#include "core/emu/memory.h"
#include "core/error.h"
#include "core/storage.h"

namespace st::host {

namespace {

constexpr size_t kAlignment = 64;
// Pageable blocks below this come from malloc's heap (no page faults worth caching).
constexpr size_t kCacheMin = 64 << 10;
constexpr size_t kCacheLimit = size_t{2} << 30;
constexpr size_t kPage = 4096;

// A pool of freed blocks by rounded size; `raw_alloc` returns nullptr when out of memory.
struct Cache {
  Cache(void* (*alloc)(size_t), void (*free)(void*), size_t min)
      : raw_alloc(alloc), raw_free(free), cache_min(min) {}
  void* (*raw_alloc)(size_t);
  void (*raw_free)(void*);
  size_t cache_min;
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;  // rounded size -> block
  Stats stats;
};

void* aligned_block(size_t bytes) {
  return std::aligned_alloc(kAlignment, bytes);
}

void free_block(void* p) {
  std::free(p);
}

// The pools are never destroyed: tensors may outlive static teardown.
Cache& pageable() {
  static Cache* c = new Cache(aligned_block, free_block, kCacheMin);
  return *c;
}

// Page-locked memory for the process's accelerator: the emulated device's own, else
// cudaHostAlloc (which throws in a build without CUDA).
void* pinned_block(size_t bytes) {
  return process_device().is_emu() ? emu::pinned_alloc(bytes) : cuda::pinned_alloc(bytes);
}

void free_pinned_block(void* p) {
  if (!emu::pinned_free(p)) cuda::pinned_free(p);
}

// Every pinned block is cached: each cudaHostAlloc is expensive, whatever its size.
Cache& pinned() {
  static Cache* c = new Cache(pinned_block, free_pinned_block, 0);
  return *c;
}

size_t rounded(size_t bytes) {
  return bytes >= kCacheMin ? (bytes + kPage - 1) / kPage * kPage
                            : (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

void drop_cached(Cache& c) {
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [size, p] : c.free_blocks) c.raw_free(p);
  c.free_blocks.clear();
  c.stats.cached = 0;
}

void* allocate_from(Cache& c, size_t bytes, const char* kind) {
  const size_t size = rounded(bytes);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.in_use += size;
    if (c.stats.in_use > c.stats.peak_in_use) c.stats.peak_in_use = c.stats.in_use;
    if (size >= c.cache_min) {
      auto it = c.free_blocks.find(size);
      if (it != c.free_blocks.end()) {
        void* p = it->second;
        c.free_blocks.erase(it);
        c.stats.cached -= size;
        return p;
      }
    }
  }
  void* p = c.raw_alloc(size);
  if (p == nullptr) {
    drop_cached(c);
    p = c.raw_alloc(size);
  }
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.in_use -= size;
  }
  ST_CHECK(p != nullptr, "out of ", kind, "host memory allocating ", bytes, " bytes");
  return p;
}

void release_to(Cache& c, void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  const size_t size = rounded(bytes);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.in_use -= size;
    if (size >= c.cache_min && c.stats.cached + size <= kCacheLimit) {
      c.free_blocks.emplace(size, ptr);
      c.stats.cached += size;
      return;
    }
  }
  c.raw_free(ptr);
}

Stats stats_of(Cache& c) {
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

}  // namespace

void* allocate(size_t bytes) {
  return allocate_from(pageable(), bytes, "");
}

void release(void* ptr, size_t bytes) {
  release_to(pageable(), ptr, bytes);
}

void* allocate_pinned(size_t bytes) {
  return allocate_from(pinned(), bytes, "page-locked ");
}

void release_pinned(void* ptr, size_t bytes) {
  release_to(pinned(), ptr, bytes);
}

void empty_cache() {
  drop_cached(pageable());
  drop_cached(pinned());
}

Stats stats() {
  return stats_of(pageable());
}

Stats pinned_stats() {
  return stats_of(pinned());
}

}  // namespace st::host
