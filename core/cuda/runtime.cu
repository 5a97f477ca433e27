// Device discovery and raw copies for the CUDA build; replaces core/cuda_disabled.cpp.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/device.h"
#include "core/storage.h"

namespace st {

namespace {
struct DeviceProbe {
  int count = 0;
  std::string reason;
};

// Probed once: the answer cannot change within a process, and a missing driver must
// read as "zero devices" rather than an exception.
const DeviceProbe& probe() {
  static const DeviceProbe p = [] {
    DeviceProbe r;
    const cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      r.count = 0;
      r.reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
      (void)cudaGetLastError();  // the failure is not sticky; clear it
    } else if (r.count == 0) {
      r.reason = "the CUDA runtime reports 0 devices";
    }
    return r;
  }();
  return p;
}
}  // namespace

bool cuda_built() {
  return true;
}

int cuda_device_count() {
  return probe().count;
}

namespace cuda {

std::string no_device_reason() {
  return probe().reason;
}

void set_thread_device(int device) {
  ST_CUDA_CHECK(cudaSetDevice(device));
  // Host waits (stream and device synchronisation) sleep on the driver instead of
  // spinning a core; set before the device's context is first used by this process.
  static std::once_flag once;
  std::call_once(once, [] { ST_CUDA_CHECK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync)); });
}

int device_of(const void* ptr) {
  bind_thread_to_process_device();  // the query would otherwise open a context on GPU 0
  cudaPointerAttributes attr{};
  ST_CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
  ST_CHECK(attr.type == cudaMemoryTypeDevice, "device_of: ", ptr, " is not device memory");
  return attr.device;
}

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memmove(dst, src, bytes);
    return;
  }
  bind_thread_to_process_device();
  // Order the copy after work already queued on the owning devices' current streams,
  // then wait for it: callers (to_vector, checkpoints) read the result right away.
  if (src_dev.is_cuda() && dst_dev.is_cuda() && src_dev.index != dst_dev.index)
    context(src_dev.index).synchronize();
  const int device = dst_dev.is_cuda() ? dst_dev.index : src_dev.index;
  DeviceGuard guard(device);
  const cudaStream_t stream = context(device).stream();
  ST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  ST_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void* pinned_alloc(size_t bytes) {
  // Loader threads allocate batches: page-locking opens a context on the current GPU.
  bind_thread_to_process_device();
  void* ptr = nullptr;
  const cudaError_t err = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // the host cache frees its blocks and retries
    return nullptr;
  }
  ST_CUDA_CHECK(err);
  return ptr;
}

void pinned_free(void* ptr) {
  // Runs from destructors: report, never throw.
  const cudaError_t err = cudaFreeHost(ptr);
  if (err != cudaSuccess && err != cudaErrorCudartUnloading)
    std::fprintf(stderr, "sparsetrain: cudaFreeHost failed: %s\n", cudaGetErrorString(err));
}

void zero_bytes(void* dst, size_t bytes, int device) {
  if (bytes == 0) return;
  DeviceGuard guard(device);
  ST_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, context(device).stream()));
}

}  // namespace cuda
}  // namespace st
