// Work on emulated-device memory, written as host code: the emulated counterpart of a
// kernel launch. `launch` queues the code on the calling thread's current stream of the
// device and returns at once (the tensors it captures by value stay alive until it has
// run, as CUDA's caching allocator keeps a block for the stream that uses it);
// `launch_and_wait` also waits and returns the code's value, as a reduction that copies
// its result to the host does. On an executor of the device (inside a layer's task, say)
// both run the code in place: it is already in stream order. Inside the code, tensors of
// that device are reached with Tensor::as_host_memory().
#pragma once

#include <functional>
#include <optional>
#include <utility>

#include "core/emu/runtime.h"
#include "core/emu/stream.h"

namespace st::emu {

// `what` names the work for a task observer and in an error (a string literal).
inline void launch(int device, std::function<void()> kernel, const char* what = nullptr) {
  if (executing_device() == device) return kernel();
  check_thread_on(device, what != nullptr ? what : "a kernel");
  current_stream(device).enqueue(std::move(kernel), /*slow=*/true, what);
}

template <class F>
auto launch_and_wait(int device, F&& f) -> decltype(f()) {
  std::optional<decltype(f())> out;
  run_in_stream_order(
      device, "a reduction", [&out, &f] { out.emplace(f()); }, /*slow=*/true);
  return std::move(*out);
}

}  // namespace st::emu
