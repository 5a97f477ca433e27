#include "core/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdio>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/storage.h"

namespace st::cuda {

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
  for (auto& [dev, d] : devices_) release_cached(d);
}

void* CachingAllocator::allocate(size_t bytes, int device, const void* stream) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  DeviceState& d = devices_[device];
  const size_t limit = max_reuse_size(size);
  for (auto it = d.free_blocks.lower_bound(size); it != d.free_blocks.end() && it->first <= limit;
       ++it) {
    if (it->second.stream != stream) continue;
    Block b = it->second;
    d.free_blocks.erase(it);
    live_.emplace(b.ptr, b);
    d.stats.allocated += b.size;
    d.stats.peak_allocated = std::max(d.stats.peak_allocated, d.stats.allocated);
    ++d.stats.cache_hits;
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
  Block b{ptr, size, device, stream};
  live_.emplace(ptr, b);
  d.stats.reserved += size;
  d.stats.allocated += size;
  d.stats.peak_allocated = std::max(d.stats.peak_allocated, d.stats.allocated);
  ++d.stats.raw_allocs;
  return ptr;
}

void CachingAllocator::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    std::fprintf(stderr, "sparsetrain: caching allocator asked to free unknown pointer %p\n", ptr);
    return;
  }
  const Block b = it->second;
  live_.erase(it);
  DeviceState& d = devices_[b.device];
  d.stats.allocated -= b.size;
  d.free_blocks.emplace(b.size, b);
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

namespace {
void* cuda_raw_alloc(size_t bytes, int device) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it; the caller frees the cache and retries
    return nullptr;
  }
  ST_CUDA_CHECK(err);
  return ptr;
}

void cuda_raw_free(void* ptr, int device) {
  // Runs from destructors and empty_cache(): report, never throw.
  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err == cudaSuccess && prev != device) err = cudaSetDevice(device);
  if (err == cudaSuccess) err = cudaFree(ptr);
  if (prev != device) (void)cudaSetDevice(prev);
  if (err != cudaSuccess && err != cudaErrorCudartUnloading)
    std::fprintf(stderr, "sparsetrain: cudaFree on cuda:%d failed: %s\n", device,
                 cudaGetErrorString(err));
}
}  // namespace

CachingAllocator& caching_allocator() {
  // Deliberately never destroyed: tensors held in static objects may be freed during
  // exit, after a destroyed allocator would be gone; the driver reclaims the memory.
  static CachingAllocator* a = new CachingAllocator(RawAllocator{cuda_raw_alloc, cuda_raw_free});
  return *a;
}

AllocatorStats memory_stats(int device) {
  return caching_allocator().stats(device);
}

void empty_cache() {
  caching_allocator().empty_cache();
}

void* device_alloc(size_t bytes, int device) {
  return caching_allocator().allocate(bytes, device, current_stream(device));
}

void device_free(void* ptr, int) {
  caching_allocator().free(ptr);
}

}  // namespace st::cuda
