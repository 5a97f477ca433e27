// Streams, events and the per-thread CUDA context layers run on.
//
// Each thread owns, per device, a Context: its own non-blocking compute stream (the
// "current" stream unless a StreamGuard says otherwise), a side stream for input copies,
// and cuDNN / cuBLAS handles that are re-bound to the current stream whenever they are
// fetched. Nothing here is shared
// between threads, so no locks are needed; the only mutable state is thread-local.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <optional>

#include "core/cuda/runtime.h"

namespace st {
class Tensor;
}

namespace st::cuda {

// Tells the caching allocator that `t`'s memory is also used by work on `stream`, so
// the block is not handed out again until that work is done (PyTorch's record_stream).
// Needed whenever a tensor allocated under one stream is read or written on another.
void record_stream(const Tensor& t, cudaStream_t stream);

// Makes `device` current for a scope and restores the previous device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool changed_ = false;
};

class Event;

// An owned non-blocking stream on one device (it does not serialise with stream 0).
class Stream {
 public:
  // Lower numbers are higher priority (cudaDeviceGetStreamPriorityRange); 0 is default.
  explicit Stream(int device, int priority = 0);
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;
  // True when all work queued so far has finished.
  bool ready() const;
  // Work queued on this stream after the call waits until `e` has completed.
  void wait(const Event& e) const;

 private:
  void release() noexcept;
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// An owned event on one device; timing is off by default (cheaper record/wait).
class Event {
 public:
  explicit Event(int device, bool timing = false);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  int device() const { return device_; }
  void record(cudaStream_t stream);
  void record(const Stream& stream) { record(stream.get()); }
  // Makes `stream` wait for this event (the comm-stream-waits-on-compute pattern).
  void block(cudaStream_t stream) const;
  void synchronize() const;
  bool ready() const;
  // Milliseconds from this event to `end`; both need timing=true and to have completed.
  float elapsed_ms(const Event& end) const;

 private:
  void release() noexcept;
  cudaEvent_t event_ = nullptr;
  int device_ = 0;
  bool timing_ = false;
};

// One thread's state on one device.
class Context {
 public:
  explicit Context(int device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  // The stream layers launch on.
  cudaStream_t stream() const { return current_; }
  void set_stream(cudaStream_t stream) { current_ = stream; }
  // The thread's own default stream (current unless a StreamGuard replaced it).
  const Stream& default_stream() const { return own_; }
  // The side stream host-to-device input copies run on (core/upload.h), so they overlap
  // the compute stream's work; created on first use.
  const Stream& copy_stream();
  void synchronize() const;
  // Library handles bound to stream(); created on first use.
  cudnnHandle_t cudnn();
  cublasHandle_t cublas();

 private:
  int device_;
  Stream own_;
  std::optional<Stream> copy_;
  cudaStream_t current_;
  cudnnHandle_t cudnn_ = nullptr;
  cudaStream_t cudnn_stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaStream_t cublas_stream_ = nullptr;
};

// This thread's context for `device`, created on first use.
Context& context(int device);
inline cudaStream_t current_stream(int device) {
  return context(device).stream();
}

// What a kernel wrapper given only device pointers launches on: the pointer's device,
// made current for the scope, and this thread's current stream there.
struct OnDeviceOf {
  int dev;
  DeviceGuard guard;
  cudaStream_t stream;
  explicit OnDeviceOf(const void* p) : dev(device_of(p)), guard(dev), stream(current_stream(dev)) {}
};

// Makes `stream` current for this thread on `device` for a scope.
class StreamGuard {
 public:
  StreamGuard(cudaStream_t stream, int device);
  explicit StreamGuard(const Stream& stream) : StreamGuard(stream.get(), stream.device()) {}
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Context* ctx_;
  cudaStream_t prev_;
};

}  // namespace st::cuda
