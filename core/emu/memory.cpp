#include "core/emu/memory.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

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

}  // namespace

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
  run_in_stream_order(
      device, "a zero fill", [=] { std::memset(dst, 0, bytes); }, /*slow=*/false);
}

}  // namespace st::emu
