// Device: where a tensor's storage lives. CPU is the reference backend and the
// default; CUDA exists when the library was built with the toolkit and a GPU is present;
// EMU is the emulated accelerator (core/emu/): host memory that only its streams may
// touch, CPU kernels queued on executor threads, present in every build.
#pragma once

#include <string>

namespace st {

enum class DeviceType { CPU, CUDA, EMU };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  static Device emu(int i = 0) { return {DeviceType::EMU, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_emu() const { return type == DeviceType::EMU; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const {
    return is_cpu() ? "cpu" : (is_cuda() ? "cuda:" : "emu:") + std::to_string(index);
  }
};

// True when this binary was compiled with the CUDA backend.
bool cuda_built();
// Number of usable CUDA devices (0 when not built or no driver/GPU).
int cuda_device_count();
// Emulated devices per process: SPARSETRAIN_EMU_DEVICES (default 8), like a node's GPUs.
int emu_device_count();
// Parses "cpu", "cuda", "cuda:1", "emu", "emu:1", "auto"; "auto" picks CUDA when a GPU
// exists, else CPU (never the emulated device).
// Asking for CUDA where none exists throws with the reason.
Device parse_device(const std::string& spec);

// The device this process trains on, set once after --device is parsed. A thread that has
// never chosen a GPU works on GPU 0 (CUDA's default), so every thread that may touch device
// memory binds the process's device first: the CUDA runtime entry points (allocation,
// copies, streams, pinned memory, pointer queries) do it on their first call in a thread,
// and the communication and loader threads do it when they start.
void set_process_device(const Device& d);
Device process_device();
void bind_thread_to_process_device();

// Where a process sits on its node: its rank among the node's processes and their count
// (the communicator finds it: MPI's shared-memory split, or the launcher's variables).
struct NodePlacement {
  int rank = 0;        // in the whole job
  int local_rank = 0;  // on this node
  int local_size = 1;  // processes on this node
};
// The GPU of "--device cuda" on a multi-GPU node: the process's node-local rank. A
// process that sees exactly one GPU while sharing its node (a scheduler that shows each
// task its own GPU, as SLURM's --gpus-per-task=1 does through CUDA_VISIBLE_DEVICES)
// takes that one. Otherwise more local processes than visible GPUs is an error naming
// the rank and both counts.
int local_gpu(const NodePlacement& placement, int device_count);
// True when the launcher limited the GPUs this process sees (CUDA_VISIBLE_DEVICES set).
bool visible_devices_restricted();
// local_gpu() given whether the visible GPUs were restricted (testable without a GPU).
int local_gpu(const NodePlacement& placement, int device_count, bool restricted);
// The emulated device of "--device emu": the node-local rank, mapped like local_gpu()
// onto emu_device_count() devices (more local processes than devices is an error); a
// launcher that sets SPARSETRAIN_EMU_DEVICES=1 shows each task one device, as
// CUDA_VISIBLE_DEVICES does under SLURM's --gpus-per-task=1, and every rank takes emu:0.
int local_emu(const NodePlacement& placement);
// parse_device() where "cuda", "emu" and "auto" mean this process's local device;
// "cuda:N" and "emu:N" stay N.
Device parse_device(const std::string& spec, const NodePlacement& placement);

}  // namespace st
