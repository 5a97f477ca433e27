#include "core/emu/memory.h"

#include <cstring>

#include "core/emu/runtime.h"
#include "core/emu/stream.h"
#include "core/error.h"

namespace st::emu {

namespace {

// Runs `fn` in stream order on `device` and waits for it.
template <typename Fn>
void in_stream_order(int device, const char* what, Fn fn) {
  if (executing_device() == device) {
    fn();
    return;
  }
  check_thread_on(device, what);
  Stream& s = current_stream(device);
  s.enqueue(fn, /*slow=*/false);
  s.synchronize();
}

}  // namespace

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  ST_CHECK(!dst_dev.is_cuda() && !src_dev.is_cuda(), "a copy from ", src_dev.str(), " to ",
           dst_dev.str(), ": emulated devices exchange memory with the host only");
  const int device = dst_dev.is_emu() ? dst_dev.index : src_dev.index;
  in_stream_order(device, "a copy", [=] { std::memmove(dst, src, bytes); });
}

void zero_bytes(void* dst, size_t bytes, int device) {
  in_stream_order(device, "a zero fill", [=] { std::memset(dst, 0, bytes); });
}

}  // namespace st::emu
