// Caching allocator: the caching logic runs against a host-memory backend (no GPU
// needed); the real cudaMalloc-backed allocator is exercised where a device exists.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/stream.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {
namespace {

using cuda::CachingAllocator;

// Host-memory backend with a byte budget, counting raw calls.
struct FakeBackend {
  size_t budget = size_t{1} << 40;
  size_t in_use = 0;
  int allocs = 0, frees = 0, events_destroyed = 0;
  std::map<void*, size_t> sizes;
  std::vector<std::unique_ptr<bool>> events;  // *event == true once "completed"

  cuda::RawAllocator raw() {
    return {[this](size_t bytes, int) -> void* {
              if (in_use + bytes > budget) return nullptr;
              void* p = std::malloc(bytes);
              sizes[p] = bytes;
              in_use += bytes;
              ++allocs;
              return p;
            },
            [this](void* p, int) {
              ++frees;
              in_use -= sizes.at(p);
              sizes.erase(p);
              std::free(p);
            },
            [this](const void*, int) -> void* {
              events.push_back(std::make_unique<bool>(false));
              return events.back().get();
            },
            [](void* e) { return *static_cast<bool*>(e); },
            [this](void*) { ++events_destroyed; },
            {}};
  }
};

const void* const kStreamA = reinterpret_cast<const void*>(0x10);
const void* const kStreamB = reinterpret_cast<const void*>(0x20);

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(3000), 4096u);
  EXPECT_EQ(CachingAllocator::round_size(size_t{1} << 20), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::round_size((size_t{1} << 20) + 1), size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::round_size((size_t{5} << 20) + 7), size_t{6} << 20);
}

TEST(CachingAllocator, ReusesFreedBlockOfSameClassAndStream) {
  FakeBackend be;
  CachingAllocator a(be.raw());
  void* p = a.allocate(1000, 0, kStreamA);
  a.free(p);
  void* q = a.allocate(900, 0, kStreamA);  // same 1 KiB class
  EXPECT_EQ(p, q);
  EXPECT_EQ(be.allocs, 1);
  cuda::AllocatorStats s = a.stats(0);
  EXPECT_EQ(s.raw_allocs, 1u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.allocated, 1024u);
  EXPECT_EQ(s.reserved, 1024u);
  a.free(q);
}

TEST(CachingAllocator, DoesNotShareBlocksAcrossStreamsOrDevices) {
  FakeBackend be;
  CachingAllocator a(be.raw());
  void* p = a.allocate(1000, 0, kStreamA);
  a.free(p);
  void* q = a.allocate(1000, 0, kStreamB);  // another stream might still be using p
  void* r = a.allocate(1000, 1, kStreamA);  // another device
  EXPECT_NE(p, q);
  EXPECT_NE(p, r);
  EXPECT_EQ(be.allocs, 3);
  a.free(q);
  a.free(r);
}

TEST(CachingAllocator, SmallClassesMatchExactlyLargeOnesWithinAQuarter) {
  FakeBackend be;
  CachingAllocator a(be.raw());
  void* big = a.allocate(4096, 0, kStreamA);
  a.free(big);
  void* small = a.allocate(100, 0, kStreamA);  // 512 B class must not take the 4 KiB block
  EXPECT_NE(small, big);
  void* large = a.allocate(size_t{10} << 20, 0, kStreamA);
  a.free(large);
  void* slightly_smaller = a.allocate(size_t{9} << 20, 0, kStreamA);  // 10 MiB <= 1.25 * 10 MiB
  EXPECT_EQ(slightly_smaller, large);
  a.free(slightly_smaller);
  void* much_smaller = a.allocate(size_t{4} << 20, 0, kStreamA);  // 10 MiB > 1.25 * 4 MiB
  EXPECT_NE(much_smaller, large);
  a.free(much_smaller);
  a.free(small);
}

TEST(CachingAllocator, StatsPeakAndEmptyCache) {
  FakeBackend be;
  CachingAllocator a(be.raw());
  void* p = a.allocate(2048, 0, kStreamA);
  void* q = a.allocate(4096, 0, kStreamA);
  EXPECT_EQ(a.stats(0).allocated, 2048u + 4096u);
  a.free(q);
  cuda::AllocatorStats s = a.stats(0);
  EXPECT_EQ(s.allocated, 2048u);
  EXPECT_EQ(s.reserved, 2048u + 4096u);
  EXPECT_EQ(s.peak_allocated, 2048u + 4096u);
  a.reset_peak(0);
  EXPECT_EQ(a.stats(0).peak_allocated, 2048u);
  a.empty_cache();
  EXPECT_EQ(be.frees, 1);  // only the cached block; p is still in use
  EXPECT_EQ(a.stats(0).reserved, 2048u);
  EXPECT_EQ(be.in_use, 2048u);
  a.free(p);
  a.empty_cache();
  EXPECT_EQ(a.stats(0).reserved, 0u);
  EXPECT_EQ(be.in_use, 0u);
}

TEST(CachingAllocator, OutOfMemoryReleasesCacheAndRetriesThenThrows) {
  FakeBackend be;
  be.budget = 8192;
  CachingAllocator a(be.raw());
  void* p = a.allocate(4096, 0, kStreamA);
  a.free(p);  // cached, holding half the budget
  // 8 KiB does not fit next to the cached 4 KiB; releasing the cache makes room.
  void* q = a.allocate(8192, 0, kStreamA);
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(be.frees, 1);
  a.free(q);
  be.budget = 0;
  try {
    a.allocate(size_t{3} << 20, 0, kStreamA);
    FAIL() << "expected out-of-memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST(CachingAllocator, RecordStreamDelaysReuseUntilOtherStreamPasses) {
  FakeBackend be;
  CachingAllocator a(be.raw());
  char* p = static_cast<char*>(a.allocate(4096, 0, kStreamA));
  a.record_stream(p + 100, kStreamB);  // interior pointers (tensor views) are fine
  a.record_stream(p, kStreamA);        // the allocation stream needs no event
  a.free(p);
  ASSERT_EQ(be.events.size(), 1u);
  EXPECT_EQ(a.stats(0).allocated, 0u);
  void* q = a.allocate(4096, 0, kStreamA);  // stream B may still be reading p
  EXPECT_NE(q, p);
  *be.events[0] = true;  // stream B has passed the event
  void* r = a.allocate(4096, 0, kStreamA);
  EXPECT_EQ(r, p);
  EXPECT_EQ(be.events_destroyed, 1);
  a.free(q);
  a.free(r);
  EXPECT_THROW(a.record_stream(p, kStreamB), Error);  // no longer live
  int on_stack = 0;
  EXPECT_THROW(a.record_stream(&on_stack, kStreamB), Error);
}

TEST(CachingAllocator, ThreadSafe) {
  FakeBackend be;
  CachingAllocator a(be.raw());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      const void* stream = reinterpret_cast<const void*>(static_cast<uintptr_t>(0x100 + t));
      for (int i = 0; i < 2000; ++i) {
        void* p = a.allocate(512 + static_cast<size_t>(i % 7) * 1000, 0, stream);
        a.free(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  cuda::AllocatorStats s = a.stats(0);
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.raw_allocs + s.cache_hits, 8000u);
  EXPECT_LE(s.raw_allocs, 4u * 7u);
}

TEST(CachingAllocatorDevice, TensorsReuseCachedBlocks) {
  ST_REQUIRE_CUDA_DEVICE();
  const Device gpu = Device::cuda(0);
  const cuda::AllocatorStats before = cuda::memory_stats(0);
  const void* first = nullptr;
  {
    Tensor t = Tensor::empty({1000}, DType::F32, gpu);
    first = t.raw();
    EXPECT_GE(cuda::memory_stats(0).allocated, before.allocated + 4000);
  }
  Tensor u = Tensor::empty({999}, DType::F32, gpu);  // same class, same thread's stream
  EXPECT_EQ(u.raw(), first);
  EXPECT_GT(cuda::memory_stats(0).cache_hits, before.cache_hits);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(u.raw()) % 256, 0u);
}

TEST(CachingAllocatorDevice, EmptyCacheReturnsUnusedMemory) {
  ST_REQUIRE_CUDA_DEVICE();
  { Tensor t = Tensor::empty({1 << 22}, DType::F32, Device::cuda(0)); }
  EXPECT_GT(cuda::memory_stats(0).reserved, cuda::memory_stats(0).allocated);
  cuda::empty_cache();
  const cuda::AllocatorStats s = cuda::memory_stats(0);
  EXPECT_EQ(s.reserved, s.allocated);
}

TEST(CachingAllocatorDevice, RecordStreamKeepsBlockUntilSideStreamIsDone) {
  ST_REQUIRE_CUDA_DEVICE();
  const Device gpu = Device::cuda(0);
  cuda::Stream side(0);
  const void* first = nullptr;
  {
    Tensor t = Tensor::full({1 << 16}, 1.0f, gpu);
    first = t.raw();
    {
      cuda::StreamGuard on_side(side);
      scale_inplace(t, 2.0f);
    }
    cuda::record_stream(t, side.get());
  }
  side.synchronize();  // the event recorded at free time has now completed
  Tensor u = Tensor::empty({1 << 16}, DType::F32, gpu);
  EXPECT_EQ(u.raw(), first);
}

}  // namespace
}  // namespace st::test
