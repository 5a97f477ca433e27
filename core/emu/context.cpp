#include "core/emu/context.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <bitset>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/device.h"
#include "core/emu/runtime.h"
#include "core/error.h"

namespace st::emu {

namespace {

struct Contexts {
  std::mutex mu;
  std::map<int, int> threads;  // device -> threads that opened a context there
  std::map<int, int> locks;    // device -> lock file descriptor (exclusive-process mode)
  std::string exclusive_dir;
  bool dir_read = false;
  std::string sticky;
};

Contexts& contexts() {
  static auto* c = new Contexts;  // never destroyed: threads may open contexts at exit
  return *c;
}

thread_local std::bitset<64> t_opened;

// Takes `device`'s lock file in the node's folder for this process (caller holds c.mu).
void lock_device(Contexts& c, int device) {
  const std::string path = c.exclusive_dir + "/emu" + std::to_string(device) + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ST_CHECK(fd >= 0, "emu: cannot open ", path, ": ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {0};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    ST_THROW("emu:", device, " is in exclusive-process mode and process ", n > 0 ? holder : "?",
             " holds a context on it (process ", ::getpid(),
             " opened one too: on a GPU, cudaErrorDevicesUnavailable)");
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid is only for the message; the lock is what counts.
  }
  c.locks[device] = fd;
}

}  // namespace

void open_context(int device) {
  if (device < 0 || device >= 64 || t_opened.test(static_cast<size_t>(device))) return;
  Contexts& c = contexts();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.dir_read) {
    const char* v = std::getenv("SPARSETRAIN_EMU_EXCLUSIVE_DIR");
    if (v != nullptr) c.exclusive_dir = v;
    c.dir_read = true;
  }
  if (!c.exclusive_dir.empty() && c.threads.count(device) == 0) lock_device(c, device);
  ++c.threads[device];
  t_opened.set(static_cast<size_t>(device));
}

int context_threads(int device) {
  Contexts& c = contexts();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.threads.find(device);
  return it == c.threads.end() ? 0 : it->second;
}

void set_exclusive_dir(const std::string& dir) {
  Contexts& c = contexts();
  std::lock_guard<std::mutex> lock(c.mu);
  c.exclusive_dir = dir;
  c.dir_read = true;
}

void keep_sticky_error(const std::string& message) {
  Contexts& c = contexts();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.sticky.empty()) c.sticky = message;
}

void rethrow_sticky_error() {
  Contexts& c = contexts();
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.sticky.empty()) throw Error(c.sticky);  // already names where it was raised
}

DeviceGuard::DeviceGuard(int device) {
  bind_thread_to_process_device();
  prev_ = current_device();
  if (prev_ != device) {
    set_thread_device(device);
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (!changed_) return;
  try {
    set_thread_device(prev_);  // destructors must not throw: the error stays with the process
  } catch (const std::exception& e) {
    keep_sticky_error(e.what());
  }
}

}  // namespace st::emu
