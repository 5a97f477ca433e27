#include "core/host_allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "core/error.h"

namespace st::host {

namespace {

constexpr size_t kAlignment = 64;
// Blocks below this come from malloc's heap (no page faults worth caching).
constexpr size_t kCacheMin = 64 << 10;
constexpr size_t kCacheLimit = size_t{2} << 30;
constexpr size_t kPage = 4096;

struct Cache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;  // rounded size -> block
  Stats stats;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may outlive static teardown
  return *c;
}

size_t rounded(size_t bytes) {
  return bytes >= kCacheMin ? (bytes + kPage - 1) / kPage * kPage
                            : (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

void* allocate(size_t bytes) {
  const size_t size = rounded(bytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.in_use += size;
    if (c.stats.in_use > c.stats.peak_in_use) c.stats.peak_in_use = c.stats.in_use;
    if (size >= kCacheMin) {
      auto it = c.free_blocks.find(size);
      if (it != c.free_blocks.end()) {
        void* p = it->second;
        c.free_blocks.erase(it);
        c.stats.cached -= size;
        return p;
      }
    }
  }
  void* p = std::aligned_alloc(kAlignment, size);
  if (p == nullptr) {
    empty_cache();
    p = std::aligned_alloc(kAlignment, size);
  }
  ST_CHECK(p != nullptr, "out of host memory allocating ", bytes, " bytes");
  return p;
}

void release(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  const size_t size = rounded(bytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.stats.in_use -= size;
    if (size >= kCacheMin && c.stats.cached + size <= kCacheLimit) {
      c.free_blocks.emplace(size, ptr);
      c.stats.cached += size;
      return;
    }
  }
  std::free(ptr);
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [size, p] : c.free_blocks) std::free(p);
  c.free_blocks.clear();
  c.stats.cached = 0;
}

Stats stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

}  // namespace st::host
