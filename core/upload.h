// Host-to-device copies of the training input that overlap compute: the pattern of
// PyTorch's DataLoader(pin_memory=True) with tensor.to(device, non_blocking=True) on a
// side stream (NVIDIA Apex's data_prefetcher).
//
// start() queues each copy with cudaMemcpyAsync on the calling thread's copy stream
// (cuda::Context::copy_stream) and records an event after them. The destinations are
// allocated for the copy stream and announced to the compute stream (record_stream), so
// the caching allocator reuses a block only once compute is done with it. finish() makes
// the compute (current) stream wait on the event; the host does not block. The host
// tensors are held until their copy has completed, so a page-locked block cannot go back
// to the loader while the DMA still reads it. From page-locked memory
// (Tensor::empty_pinned) the copy runs without the CPU; from pageable memory it is still
// correct, but the driver stages it synchronously.
//
// On the CPU nothing is copied: start() hands back the host tensors themselves.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace st {

class InputUploader {
 public:
  explicit InputUploader(Device device);
  ~InputUploader();  // waits for the copies still in flight
  InputUploader(const InputUploader&) = delete;
  InputUploader& operator=(const InputUploader&) = delete;

  Device device() const { return device_; }

  // Copies begun by start(): the device tensors, not to be read before finish().
  struct Pending {
    std::vector<Tensor> tensors;
    uint64_t id = 0;
  };
  // Begins copying host tensors (one batch) to the device.
  Pending start(const std::vector<Tensor>& host);
  // Orders the calling thread's current stream after `pending`'s copies; returns its
  // tensors, ready for work queued from now on.
  std::vector<Tensor> finish(Pending pending);

 private:
  struct Impl;  // copies in flight (core/cuda/upload.cu)
  Device device_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace st
