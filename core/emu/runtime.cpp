#include "core/emu/runtime.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/emu/context.h"
#include "core/error.h"

namespace st::emu {

namespace {

thread_local int t_bound = -1;
thread_local int t_executing = -1;

// The threads of an OpenMP parallel region that an executor's task starts work for that
// task, and device memory is theirs to touch as well. They inherit the executor's OpenMP
// data environment, so the executor marks it: its default-device ICV holds kOmpMark +
// device (no target regions exist, so the ICV means nothing else here).
constexpr int kOmpMark = 1 << 20;

int omp_team_device() {
  if (!omp_in_parallel()) return -1;
  const int d = omp_get_default_device() - kOmpMark;
  return d >= 0 && d < device_count() ? d : -1;
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  ST_CHECK(end != v && *end == '\0' && n >= lo && n <= hi, name, "=", v,
           ": expected a whole number in [", lo, ", ", hi, "]");
  return static_cast<int>(n);
}

std::atomic<int>& delay() {
  static std::atomic<int> us{env_int("SPARSETRAIN_EMU_DELAY_US", 0, 0, 1000000)};
  return us;
}

}  // namespace

int device_count() {
  static const int n = env_int("SPARSETRAIN_EMU_DEVICES", 8, 1, 64);
  return n;
}

void read_environment() {
  device_count();
  delay();
}

void set_thread_device(int device) {
  ST_CHECK(device >= 0 && device < device_count(), "emu: no device emu:", device, " (",
           device_count(), " per process; SPARSETRAIN_EMU_DEVICES sets the count)");
  open_context(device);  // as cudaSetDevice does since CUDA 12
  t_bound = device;
}

int thread_device() {
  return t_bound;
}

int current_device() {
  return t_bound < 0 ? 0 : t_bound;
}

void check_thread_on(int device, const char* what) {
  if (t_executing == device || current_device() == device) return;
  ST_THROW(what, " on emu:", device, " from a thread that works on emu:", current_device(),
           t_bound < 0 ? " (it never bound a device: bind the process's device first)"
                       : " (bind the device first)");
}

int executing_device() {
  return t_executing >= 0 ? t_executing : omp_team_device();
}

void set_executing_device(int device) {
  t_executing = device;
  t_bound = device;
  omp_set_default_device(kOmpMark + device);
}

int task_delay_us() {
  return delay().load(std::memory_order_relaxed);
}

void set_task_delay_us(int us) {
  delay().store(us < 0 ? 0 : us);
}

}  // namespace st::emu
