#include "core/device.h"

#include <atomic>
#include <cstdlib>

#include "core/emu/runtime.h"
#include "core/error.h"
#include "core/storage.h"

namespace st {

namespace {
// -1: not set (a CPU run); otherwise the CUDA device index.
std::atomic<int> g_process_gpu{-1};
// -1: not set; otherwise the emulated device index.
std::atomic<int> g_process_emu{-1};
}  // namespace

void set_process_device(const Device& d) {
  g_process_gpu.store(d.is_cuda() ? d.index : -1);
  g_process_emu.store(d.is_emu() ? d.index : -1);
  bind_thread_to_process_device();
}

Device process_device() {
  const int gpu = g_process_gpu.load(), emu = g_process_emu.load();
  if (emu >= 0) return Device::emu(emu);
  return gpu < 0 ? Device::cpu() : Device::cuda(gpu);
}

void bind_thread_to_process_device() {
  // Per thread: the binding a thread last made (-1 none), so repeated calls are free.
  thread_local int bound = -1;
  const int emu = g_process_emu.load();
  if (emu >= 0) {
    if (emu::thread_device() != emu) emu::set_thread_device(emu);
    return;
  }
  const int gpu = g_process_gpu.load();
  if (gpu < 0 || gpu == bound) return;
  cuda::set_thread_device(gpu);
  bound = gpu;
}

int emu_device_count() {
  return emu::device_count();
}

namespace {

// The device of a node-local rank among `count` devices of one kind ("cuda"/"emu", named
// in errors with `unit`). One device shown to a task that shares its node means the
// launcher gave each task its own (SLURM's --gpus-per-task=1): take it.
int local_device(const NodePlacement& p, int count, bool restricted, const char* kind,
                 const char* unit, const char* remedy) {
  ST_CHECK(count > 0, "--device ", kind, ": no ", unit, " visible to rank ", p.rank);
  if (restricted && count == 1) return 0;
  ST_CHECK(p.local_size <= count, "--device ", kind, ": rank ", p.rank, " is one of ", p.local_size,
           " processes on its node, which has ", count, " ", unit, "(s); ", remedy);
  return p.local_rank;
}

}  // namespace

int local_emu(const NodePlacement& p) {
  // SPARSETRAIN_EMU_DEVICES=1 set by the launcher is the emulated CUDA_VISIBLE_DEVICES of
  // one GPU per task.
  const char* v = std::getenv("SPARSETRAIN_EMU_DEVICES");
  return local_device(p, emu_device_count(), v != nullptr && *v != '\0', "emu", "emulated device",
                      "raise SPARSETRAIN_EMU_DEVICES or pick one with --device emu:N");
}

namespace {

// The N of "kind:N", all digits already checked; a number too long for an int is no device.
int device_index(const std::string& spec, size_t from) {
  const std::string digits = spec.substr(from);
  return digits.size() > 6 ? 1 << 30 : std::stoi(digits);
}

// "emu" (this process's local device) or "emu:N".
Device parse_emu(const std::string& spec, const NodePlacement& placement) {
  if (spec.size() == 3) return Device::emu(local_emu(placement));
  ST_CHECK(spec[3] == ':' && spec.size() > 4 &&
               spec.find_first_not_of("0123456789", 4) == std::string::npos,
           "--device: cannot parse '", spec, "' (expected emu or emu:N)");
  const int index = device_index(spec, 4);
  ST_CHECK(index < emu_device_count(), "--device ", spec, ": no such emulated device (",
           emu_device_count(), " per process; SPARSETRAIN_EMU_DEVICES sets the count)");
  return Device::emu(index);
}

}  // namespace

bool visible_devices_restricted() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v != nullptr && *v != '\0';
}

int local_gpu(const NodePlacement& p, int device_count) {
  return local_gpu(p, device_count, visible_devices_restricted());
}

int local_gpu(const NodePlacement& p, int device_count, bool restricted) {
  return local_device(p, device_count, restricted, "cuda", "GPU",
                      "start at most one process per GPU (or pick GPUs with --device cuda:N)");
}

Device parse_device(const std::string& spec, const NodePlacement& placement) {
  if (spec == "cpu") return Device::cpu();
  if (spec == "auto")
    return cuda_device_count() > 0 ? Device::cuda(local_gpu(placement, cuda_device_count()))
                                   : Device::cpu();
  if (spec.rfind("emu", 0) == 0) {
    emu::read_environment();
    return parse_emu(spec, placement);
  }
  if (spec.rfind("cuda", 0) == 0) {
    ST_CHECK(cuda_built(), "--device ", spec,
             ": this sparsetrain was built without CUDA (configure with -DSPARSETRAIN_CUDA=ON)");
    const int n = cuda_device_count();
    if (spec.size() == 4) {
      ST_CHECK(n > 0, "--device ", spec, ": no CUDA device visible (rank ", placement.rank, ")");
      return Device::cuda(local_gpu(placement, n));
    }
    ST_CHECK(spec[4] == ':' && spec.size() > 5 &&
                 spec.find_first_not_of("0123456789", 5) == std::string::npos,
             "--device: cannot parse '", spec, "' (expected cpu, cuda, cuda:N or auto)");
    const int index = device_index(spec, 5);
    ST_CHECK(index < n, "--device ", spec, ": no such GPU (", n, " CUDA device(s) visible)");
    return Device::cuda(index);
  }
  ST_THROW("--device: unknown device '", spec,
           "' (expected cpu, cuda, cuda:N, emu, emu:N or auto)");
}

Device parse_device(const std::string& spec) {
  return parse_device(spec, NodePlacement{});
}

}  // namespace st
