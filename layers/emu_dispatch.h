// Layer code on the emulated device (core/emu/, docs/GPU.md "The emulated device"): the
// CPU kernels run as one task on the calling thread's current stream of the device, the
// only place its memory may be touched, and the host waits for the task. Waiting is the
// first form: a layer sizes its outputs while it computes them, so the host learns their
// shapes only from the finished task (a launch that returns at once needs each layer's
// output shape on the host first).
#pragma once

#include <functional>

#include "core/tensor.h"

namespace st {

// Runs `fn` in stream order on the emulated `device` and waits for it; a tensor it returns
// in host memory (the CPU code's own allocations) is copied into `device`'s memory inside
// the task, so every output lives on the device. On that device's executor (a container's
// child inside its parent's task) it runs in place.
Tensor run_on_emu(Device device, const std::function<Tensor()>& fn);

}  // namespace st
