// Storage: one allocation on one device, shared by every tensor view into it.
// CPU memory is 64-byte aligned (one cache line, one AVX-512 vector); CUDA memory
// comes from the caching allocator in core/cuda/ (never managed memory).
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace st {

class Storage {
 public:
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
};

// Raw device memory entry points. The CUDA build implements them in core/cuda/;
// the CPU-only build compiles core/cuda_disabled.cpp, where they throw.
namespace cuda {
void* device_alloc(size_t bytes, int device);
void device_free(void* ptr, int device);
// Copies between any two locations (host or device); waits until the copy is done.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void zero_bytes(void* dst, size_t bytes, int device);
}  // namespace cuda

}  // namespace st
