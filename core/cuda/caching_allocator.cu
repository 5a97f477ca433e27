#include "core/cuda/caching_allocator.h"

#include <cstdio>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace st::cuda {

namespace {
void* cuda_raw_alloc(size_t bytes, int device) {
  DeviceGuard guard(device);
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it; the caller frees the cache and retries
    return nullptr;
  }
  ST_CUDA_CHECK(err);
  return ptr;
}

void cuda_raw_free(void* ptr, int device) {
  // Runs from destructors and empty_cache(): report, never throw.
  int prev = 0;
  cudaError_t err = cudaGetDevice(&prev);
  if (err == cudaSuccess && prev != device) err = cudaSetDevice(device);
  if (err == cudaSuccess) err = cudaFree(ptr);
  if (prev != device) (void)cudaSetDevice(prev);
  if (err != cudaSuccess && err != cudaErrorCudartUnloading)
    std::fprintf(stderr, "sparsetrain: cudaFree on cuda:%d failed: %s\n", device,
                 cudaGetErrorString(err));
}
void* cuda_record_event(const void* stream, int device) {
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  ST_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ST_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(const_cast<void*>(stream))));
  return e;
}

bool cuda_event_done(void* event) {
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) return false;
  ST_CUDA_CHECK(err);
  return true;
}

void cuda_destroy_event(void* event) {
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}
}  // namespace

CachingAllocator& caching_allocator() {
  // Deliberately never destroyed: tensors held in static objects may be freed during
  // exit, after a destroyed allocator would be gone; the driver reclaims the memory.
  static CachingAllocator* a = new CachingAllocator(RawAllocator{
      cuda_raw_alloc, cuda_raw_free, cuda_record_event, cuda_event_done, cuda_destroy_event, {}});
  return *a;
}

AllocatorStats memory_stats(int device) {
  return caching_allocator().stats(device);
}

void empty_cache() {
  caching_allocator().empty_cache();
}

void* device_alloc(size_t bytes, int device) {
  return caching_allocator().allocate(bytes, device, current_stream(device));
}

void device_free(void* ptr, int) {
  caching_allocator().free(ptr);
}

void record_stream(const Tensor& t, cudaStream_t stream) {
  ST_CHECK(t.device().is_cuda(), "record_stream: ", t.str(), " is not a CUDA tensor");
  if (t.nbytes() > 0) caching_allocator().record_stream(t.raw(), stream);
}

}  // namespace st::cuda
