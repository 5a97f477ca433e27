// Contexts of the emulated devices, with CUDA's meaning. A CUDA thread opens a device's
// primary context the first time it sets that device (cudaSetDevice, CUDA 12 and later),
// creates a stream or allocates on it; a process that opens one on a GPU it was not given
// takes memory there and, under the EXCLUSIVE_PROCESS compute mode common on clusters,
// keeps the GPU's owner out (cudaErrorDevicesUnavailable). The emulation records which
// threads of the process opened a context on each device, and in exclusive-process mode
// (SPARSETRAIN_EMU_EXCLUSIVE_DIR: a folder shared by the processes of a node) a process's
// first context on a device takes that device's lock file there: a second process fails
// in one line naming the device and the holder's pid.
#pragma once

#include <string>

namespace st::emu {

// Records that the calling thread opened a context on `device` (once per thread and
// device); in exclusive-process mode throws when another process holds the device.
void open_context(int device);
// How many threads of this process opened a context on `device`.
int context_threads(int device);
// Turns exclusive-process mode on with `dir` as the node's folder ("" turns it off; the
// default is SPARSETRAIN_EMU_EXCLUSIVE_DIR). Devices already opened are not locked.
void set_exclusive_dir(const std::string& dir);

// An error raised where CUDA would swallow it (a destructor restoring a device) stays
// with the process and is rethrown by the next stream synchronize, as CUDA's sticky
// errors resurface at an unrelated call.
void keep_sticky_error(const std::string& message);
void rethrow_sticky_error();

// cuda::DeviceGuard's counterpart: binds the process's device first (a thread that never
// chose one reports device 0), switches to `device`, and restores the previous device at
// the end, which, as with cudaSetDevice, opens a context there.
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

}  // namespace st::emu
