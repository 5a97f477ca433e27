#include "core/emu/memory.h"

#include <cstring>

#include "core/emu/stream.h"
#include "core/error.h"

namespace st::emu {

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
