// bulk::Ops on an emulated device: the CPU kernels (CpuOps) run on the executor of the
// calling thread's current stream for the device, with CudaOps's timing. A decorator
// generated from the operation list (op_list.h, decorator.h) around those kernels, by
// each call's mode: Later and Sized calls are queued and return at once (a Sized call's
// outputs are sized on the host first, as CudaOps allocates before it launches; the task
// works on copies of the buffer handles taken then); Wait calls (host values, downloads,
// uploads, selections whose count sizes the output) queue and wait; Handle calls (sizes,
// views) run on the host; finish() waits for the stream; collectives wait for the stream,
// then the kernels hand the device buffers to the emulated collective backend (which
// orders its own stream after the caller's), or stage them through the host for any other
// backend.
//
// Errors raised inside a queued call (argument checks) surface at the next call that
// waits, as a kernel's error does on a GPU. One EmuOps serves one thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "sparsify/bulk/decorator.h"

namespace st::emu {
class Stream;
}

namespace st::bulk {

class EmuOps : public Decorator {
 public:
  // `device` must be an emulated device; throws with one line naming it otherwise.
  explicit EmuOps(Device device);
  ~EmuOps() override;
  EmuOps(const EmuOps&) = delete;
  EmuOps& operator=(const EmuOps&) = delete;

  Device device() const override { return device_; }
  const char* name() const override { return "emu"; }

 protected:
  void around(Call& call, FunctionRef run) override;
  bool queues() const override { return true; }
  void later(const OpInfo& op, std::function<void()> task) override;

 private:
  class Kernels;  // CpuOps on this device's buffers
  EmuOps(Device device, std::shared_ptr<Kernels> kernels);
  emu::Stream& stream() const;

  Device device_;
  std::shared_ptr<Kernels> kernels_;  // shared with the queued calls
};

}  // namespace st::bulk
