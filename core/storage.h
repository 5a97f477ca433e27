// Storage: one allocation on one device, shared by every tensor view into it.
// CPU memory is 64-byte aligned (one cache line, one AVX-512 vector), or page-locked
// (`pinned`, for input the GPU copies asynchronously; core/host_allocator.h); CUDA
// memory comes from the caching allocator in core/cuda/ (never managed memory).
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace st {

class Storage {
 public:
  Storage(size_t bytes, Device device, bool pinned = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  // Memory another library owns (a PyTorch bucket the comm hook exchanges in place): never
  // freed here, so the owner must keep it alive for as long as any view of it.
  static std::shared_ptr<Storage> borrow(void* ptr, size_t bytes, Device device);

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool pinned() const { return pinned_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool pinned_ = false;
  bool owned_ = true;

  Storage() = default;
};

// Raw device memory entry points. The CUDA build implements them in core/cuda/;
// the CPU-only build compiles core/cuda_disabled.cpp, where they throw.
namespace cuda {
void* device_alloc(size_t bytes, int device);
void device_free(void* ptr, int device);
// Copies between any two locations (host or device); waits until the copy is done.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void zero_bytes(void* dst, size_t bytes, int device);
// Page-locked host memory (cudaHostAlloc, portable); nullptr when out of memory.
void* pinned_alloc(size_t bytes);
void pinned_free(void* ptr);
// Makes `device` the calling thread's current GPU (cudaSetDevice).
void set_thread_device(int device);
}  // namespace cuda

}  // namespace st
