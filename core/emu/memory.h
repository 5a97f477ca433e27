// Copies into, out of and between emulated devices, and their zero fill. Each goes through
// the calling thread's current stream of the emulated device and waits for it
// (cudaMemcpyAsync + cudaStreamSynchronize); inside that device's executor (a task
// already in stream order) it runs in place.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace st::emu {

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void zero_bytes(void* dst, size_t bytes, int device);

}  // namespace st::emu
