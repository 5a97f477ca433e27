#include "core/emu/memory.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "core/caching_allocator.h"
#include "core/emu/context.h"
#include "core/emu/launch.h"
#include "core/emu/ordering.h"
#include "core/emu/runtime.h"
#include "core/emu/stream.h"
#include "core/error.h"

namespace st::emu {

namespace {

std::mutex g_pinned_mu;
std::set<void*>& pinned_blocks() {
  static auto* s = new std::set<void*>;  // never destroyed: tensors may outlive teardown
  return *s;
}
std::atomic<int64_t> g_pageable_async{0};
std::atomic<int64_t> g_reused{0};

Stream& stream_of(const void* key) {
  return *static_cast<Stream*>(const_cast<void*>(key));
}

void poison(void* ptr, size_t bytes, const void* key) {
  ++g_reused;
  forget_reads(ptr, bytes);  // the block's new owner starts with no reads to wait for
  Stream& s = stream_of(key);
  // Inside one of the stream's tasks the caller is already in its order (and is about
  // to write the block): poison now, not after the task.
  if (executing_stream() == &s) return (void)std::memset(ptr, 0xFF, bytes);
  s.enqueue([=] { std::memset(ptr, 0xFF, bytes); }, /*slow=*/false, "poison a reused block");
}

CachingAllocator& device_allocator() {
  // Never destroyed: tensors held in static objects may be freed during exit.
  static auto* a = new CachingAllocator(
      RawAllocator{[](size_t bytes, int) { return std::aligned_alloc(64, bytes); },
                   [](void* ptr, int) { std::free(ptr); },
                   [](const void* key, int) -> void* {
                     auto* e = new Event;
                     e->record(stream_of(key), "mark a freed block");
                     return e;
                   },
                   [](void* e) { return static_cast<Event*>(e)->ready(); },
                   [](void* e) { delete static_cast<Event*>(e); }, poison});
  return *a;
}

}  // namespace

void* device_alloc(size_t bytes, int device) {
  open_context(device);
  return device_allocator().allocate(bytes, device, &allocation_stream(device));
}

void device_free(void* ptr) {
  device_allocator().free(ptr);
}

void record_stream(const void* ptr, Stream& s) {
  device_allocator().record_stream(ptr, &s);
}

int64_t reused_blocks() {
  return g_reused.load();
}

void* pinned_alloc(size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) return nullptr;  // the host cache frees its blocks and retries
  std::lock_guard<std::mutex> lock(g_pinned_mu);
  pinned_blocks().insert(p);
  return p;
}

bool pinned_free(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mu);
    if (pinned_blocks().erase(ptr) == 0) return false;
  }
  std::free(ptr);
  return true;
}

int64_t pageable_async_copies() {
  return g_pageable_async.load();
}

void count_pageable_async_copy() {
  ++g_pageable_async;
}

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  ST_CHECK(!dst_dev.is_cuda() && !src_dev.is_cuda(), "a copy from ", src_dev.str(), " to ",
           dst_dev.str(), ": emulated devices exchange memory with the host only");
  const int device = dst_dev.is_emu() ? dst_dev.index : src_dev.index;
  run_in_stream_order(
      device, "a copy", [=] { std::memmove(dst, src, bytes); }, /*slow=*/false);
}

void zero_bytes(void* dst, size_t bytes, int device) {
  // cudaMemsetAsync: queued, the host does not wait.
  launch(
      device, [=] { std::memset(dst, 0, bytes); }, "a zero fill");
}

}  // namespace st::emu
