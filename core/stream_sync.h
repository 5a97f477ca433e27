// Host-side ordering against a device's streams, written once for every accelerator
// (CUDA and the emulated device) so orchestration code does not branch on the kind. On
// the CPU there is no stream: everything has run when the call returns, and these are
// no-ops.
#pragma once

#include <memory>

#include "core/device.h"

namespace st {

// Blocks until everything the calling thread queued on its current stream of `d` has run.
void synchronize_current_stream(Device d);

// The position of everything the calling thread has queued on its current stream of a
// device so far (an event recorded there); another thread can block on it. Empty on the
// CPU, where wait() returns at once.
class StreamPosition {
 public:
  static StreamPosition record_current(Device d);
  void wait() const;

 private:
  std::shared_ptr<void> event_;
  void (*wait_)(const void*) = nullptr;
};

}  // namespace st
