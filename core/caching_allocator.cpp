#include "core/caching_allocator.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace st {

namespace {
constexpr size_t kMinBlock = 512;                // cudaMalloc alignment is 256 B anyway
constexpr size_t kSmallLimit = size_t{1} << 20;  // powers of two up to here
constexpr size_t kLargeGranule = size_t{2} << 20;

// A cached block this much larger than the request may still serve it (large classes
// only; small classes are powers of two, so only the exact class matches).
size_t max_reuse_size(size_t rounded) {
  return rounded <= kSmallLimit ? rounded : rounded + rounded / 4;
}
}  // namespace

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  if (bytes <= kSmallLimit) {
    size_t s = kMinBlock;
    while (s < bytes) s <<= 1;
    return s;
  }
  return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
}

CachingAllocator::CachingAllocator(RawAllocator raw) : raw_(std::move(raw)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  collect_pending();
  for (auto& [dev, d] : devices_) release_cached(d);
}

void CachingAllocator::collect_pending() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    bool done = true;
    for (void* e : p.events) done = done && raw_.event_done(e);
    if (!done) {
      ++i;
      continue;
    }
    for (void* e : p.events) raw_.destroy_event(e);
    devices_[p.block.device].free_blocks.emplace(p.block.size, std::move(p.block));
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

void* CachingAllocator::allocate(size_t bytes, int device, const void* stream) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_.empty()) collect_pending();
  DeviceState& d = devices_[device];
  const size_t limit = max_reuse_size(size);
  for (auto it = d.free_blocks.lower_bound(size); it != d.free_blocks.end() && it->first <= limit;
       ++it) {
    if (it->second.stream != stream) continue;
    Block b = std::move(it->second);
    d.free_blocks.erase(it);
    live_.emplace(static_cast<char*>(b.ptr), b);
    d.stats.allocated += b.size;
    d.stats.peak_allocated = std::max(d.stats.peak_allocated, d.stats.allocated);
    ++d.stats.cache_hits;
    if (raw_.on_reuse) raw_.on_reuse(b.ptr, b.size, stream);
    return b.ptr;
  }
  void* ptr = raw_.alloc(size, device);
  if (!ptr) {
    // Cached blocks of other sizes or streams may be what stands in the way.
    release_cached(d);
    ptr = raw_.alloc(size, device);
  }
  ST_CHECK(ptr != nullptr, "CUDA out of memory: cannot allocate ", bytes, " bytes (class ", size,
           ") on cuda:", device, "; ", d.stats.allocated, " bytes in use, ", d.stats.reserved,
           " reserved by sparsetrain");
  live_.emplace(static_cast<char*>(ptr), Block{ptr, size, device, stream, {}});
  d.stats.reserved += size;
  d.stats.allocated += size;
  d.stats.peak_allocated = std::max(d.stats.peak_allocated, d.stats.allocated);
  ++d.stats.raw_allocs;
  return ptr;
}

void CachingAllocator::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(static_cast<char*>(ptr));
  if (it == live_.end()) {
    std::fprintf(stderr, "sparsetrain: caching allocator asked to free unknown pointer %p\n", ptr);
    return;
  }
  Block b = std::move(it->second);
  live_.erase(it);
  DeviceState& d = devices_[b.device];
  d.stats.allocated -= b.size;
  if (b.other_uses.empty()) {
    d.free_blocks.emplace(b.size, std::move(b));
    return;
  }
  // Work queued so far on the other streams may still touch the block.
  Pending p;
  try {
    for (const void* s : b.other_uses) p.events.push_back(raw_.record_event(s, b.device));
  } catch (const std::exception& e) {
    // Runs from destructors: never throw. Without the events the block is not safe to
    // reuse, so it stays out of circulation (still counted as reserved).
    std::fprintf(stderr, "sparsetrain: caching allocator keeps a block out of reuse: %s\n",
                 e.what());
    for (void* ev : p.events) raw_.destroy_event(ev);
    return;
  }
  b.other_uses.clear();
  p.block = std::move(b);
  pending_.push_back(std::move(p));
}

void CachingAllocator::record_stream(const void* ptr, const void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  char* p = static_cast<char*>(const_cast<void*>(ptr));
  auto it = live_.upper_bound(p);
  ST_CHECK(it != live_.begin(), "record_stream: ", ptr, " is not memory of the caching allocator");
  --it;
  Block& b = it->second;
  ST_CHECK(p < it->first + b.size, "record_stream: ", ptr,
           " is not memory of the caching allocator");
  if (stream == b.stream) return;
  for (const void* s : b.other_uses)
    if (s == stream) return;
  b.other_uses.push_back(stream);
}

void CachingAllocator::release_cached(DeviceState& d) {
  for (auto& [size, b] : d.free_blocks) {
    raw_.free(b.ptr, b.device);
    d.stats.reserved -= size;
  }
  d.free_blocks.clear();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  collect_pending();  // blocks still awaited by another stream stay reserved
  for (auto& [dev, d] : devices_) release_cached(d);
}

AllocatorStats CachingAllocator::stats(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(device);
  return it == devices_.end() ? AllocatorStats{} : it->second.stats;
}

void CachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceState& d = devices_[device];
  d.stats.peak_allocated = d.stats.allocated;
}

}  // namespace st
