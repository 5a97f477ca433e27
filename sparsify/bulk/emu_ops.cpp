#include "sparsify/bulk/emu_ops.h"

#include "comm/communicator.h"
#include "core/emu/stream.h"
#include "core/error.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/host_staging.h"

namespace st::bulk {

namespace {
// True on an executor while it runs a queued call, whose outputs the host sized already.
thread_local bool t_queued_call = false;
}  // namespace

// The CPU kernels on this device's buffers; every call reaches memory through
// CpuOps::memory, i.e. Tensor::raw, which only this device's executors may use.
class EmuOps::Kernels : public CpuOps {
 public:
  explicit Kernels(Device d) : device_(d) {}
  Device device() const override { return device_; }
  const char* name() const override { return "emu"; }
  void resize(Buffer& b, Elem e, int64_t n) override {
    ST_CHECK(!t_queued_call || (b.size() == n && b.elem() == e), "bulk::EmuOps on ", device_.str(),
             ": a queued call resized an output to ", n, " elements that the host had sized to ",
             b.size());
    CpuOps::resize(b, e, n);
  }

 protected:
  // After the stream (EmuOps::around): the device buffers themselves for the emulated
  // collective backend (which orders its own stream after the caller's), host copies for
  // any other backend (MPI, Local), as CudaOps does with NCCL and the others.
  void on_comm_tensors(Communicator& comm, const std::vector<Tensor*>& inputs,
                       const std::vector<Tensor*>& outputs,
                       const std::function<void()>& op) override {
    if (comm.backend() == "emu")
      op();
    else
      on_host_copies(inputs, outputs, op);
  }

 private:
  Device device_;
};

EmuOps::EmuOps(Device device) : EmuOps(device, std::make_shared<Kernels>(device)) {}

EmuOps::EmuOps(Device device, std::shared_ptr<Kernels> kernels)
    : Decorator(*kernels), device_(device), kernels_(std::move(kernels)) {
  ST_CHECK(device.is_emu(), "bulk::EmuOps: ", device.str(), " is not an emulated device");
}

EmuOps::~EmuOps() = default;

emu::Stream& EmuOps::stream() const {
  return emu::current_stream(device_.index);
}

void EmuOps::later(const OpInfo&, std::function<void()> task) {
  stream().enqueue([k = kernels_, task = std::move(task)] {
    t_queued_call = true;
    try {
      task();
    } catch (...) {
      t_queued_call = false;
      throw;
    }
    t_queued_call = false;
  });
}

// Handle and Release calls touch handles only and run here; collectives run here once
// the stream is done (the kernels hand the communicator device views or host copies);
// the others (Wait, and the fence) run on the stream, which this thread waits for.
void EmuOps::around(Call& call, FunctionRef run) {
  if (call.op.mode == OpMode::Handle || call.op.mode == OpMode::Release) {
    run();
    return;
  }
  if (call.op.mode == OpMode::Comm) {
    stream().synchronize();
    run();
    return;
  }
  emu::Stream& s = stream();
  s.enqueue([run] { run(); });
  s.synchronize();
}

}  // namespace st::bulk
