// Caching allocator of device memory (over cudaMalloc, never managed memory; or the
// emulated device's host blocks, core/emu/memory.h), the idea of PyTorch's
// CUDACachingAllocator without block splitting: requests are rounded to size classes,
// freed blocks go to a per-device free list and are handed out again to a later
// request of the same class on the same stream (stream order makes that safe without
// a sync). A block also used on another stream (a communication stream reading a
// bucket, say) must be announced with record_stream(), as in PyTorch: when it is freed,
// an event is recorded on each such stream and the block is reused only once all of
// them have passed it. cudaMalloc/cudaFree synchronise the device, so a warm training
// loop should call neither. Thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

namespace st {

struct AllocatorStats {
  size_t allocated = 0;       // bytes in blocks handed out and not yet freed
  size_t reserved = 0;        // bytes obtained from the raw allocator (in use + cached)
  size_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  uint64_t raw_allocs = 0;    // calls to the raw allocator (cudaMalloc)
  uint64_t cache_hits = 0;    // requests served from the free list
};

// Where blocks really come from: cudaMalloc/cudaFree in the process-wide allocator,
// host memory in the allocator's unit tests. `alloc` returns nullptr when out of memory.
// The event hooks order cross-stream reuse (cudaEventRecord / cudaEventQuery /
// cudaEventDestroy); they are only called for blocks passed to record_stream().
struct RawAllocator {
  std::function<void*(size_t bytes, int device)> alloc;
  std::function<void(void* ptr, int device)> free;
  std::function<void*(const void* stream, int device)> record_event;
  std::function<bool(void* event)> event_done;
  std::function<void(void* event)> destroy_event;
  // Optional: called (under the allocator's lock) when a cached block is handed to a new
  // allocation on `stream`. The emulated device poisons the block there, so a reader
  // that was not announced with record_stream() sees NaN instead of stale values.
  std::function<void(void* ptr, size_t bytes, const void* stream)> on_reuse;
};

class CachingAllocator {
 public:
  explicit CachingAllocator(RawAllocator raw);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` for use on `stream` (an opaque key, the cudaStream_t).
  // On out-of-memory, releases the device's cached blocks and retries once, then throws.
  void* allocate(size_t bytes, int device, const void* stream);
  // Returns a block to the cache. Unknown pointers are reported on stderr, not thrown:
  // this runs from destructors.
  void free(void* ptr);
  // Marks the live block containing `ptr` as used on `stream` too (see above).
  void record_stream(const void* ptr, const void* stream);
  // Gives every cached (unused) block back to the raw allocator.
  void empty_cache();
  AllocatorStats stats(int device) const;
  void reset_peak(int device);

  // Size classes: 512 B minimum, powers of two up to 1 MiB, then multiples of 2 MiB.
  static size_t round_size(size_t bytes);

 private:
  struct Block {
    void* ptr;
    size_t size;
    int device;
    const void* stream;                   // stream current at allocation
    std::vector<const void*> other_uses;  // from record_stream()
  };
  struct Pending {  // freed, waiting for events on the other streams
    Block block;
    std::vector<void*> events;
  };
  struct DeviceState {
    std::multimap<size_t, Block> free_blocks;  // by size
    AllocatorStats stats;
  };
  // Callers hold mu_.
  void release_cached(DeviceState& d);
  void collect_pending();

  RawAllocator raw_;
  mutable std::mutex mu_;
  std::map<int, DeviceState> devices_;
  std::map<char*, Block> live_;  // ordered, so an interior pointer finds its block
  std::vector<Pending> pending_;
};

}  // namespace st
