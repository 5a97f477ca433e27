// The runtime calls InputUploader's orchestration (core/upload.cpp) makes, one
// implementation per accelerator: CUDA (core/cuda/upload.cu) and the emulated device
// (core/emu/upload.cpp). The uploader itself (which copies are in flight, when host
// memory may go back to the loader, how compute is ordered after a batch) is written once.
#pragma once

#include <memory>

#include "core/tensor.h"

namespace st {

class UploadEngine {
 public:
  virtual ~UploadEngine() = default;
  // Queues a copy of `host` into a new device tensor on the device's copy stream (a side
  // stream, so it overlaps compute) and returns that tensor. Its block belongs to the copy
  // stream: the stream that reads it must be announced (record_use_on_current).
  virtual Tensor copy_async(const Tensor& host) = 0;
  // Announces the calling thread's current stream as a user of `device_tensor`'s block
  // (record_stream), so the allocator reuses it only once that stream is done with it.
  virtual void record_use_on_current(const Tensor& device_tensor) = 0;
  // The position after every copy queued so far (an event on the copy stream).
  virtual std::shared_ptr<void> mark() = 0;
  virtual bool reached(const void* mark) = 0;
  virtual void wait_host(const void* mark) = 0;
  // Work queued from now on the calling thread's current stream waits for `mark`.
  virtual void order_current_after(const void* mark) = 0;
};

// Throws one line in a build without the CUDA backend.
std::unique_ptr<UploadEngine> make_cuda_upload_engine(Device device);
std::unique_ptr<UploadEngine> make_emu_upload_engine(Device device);

}  // namespace st
