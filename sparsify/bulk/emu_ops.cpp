#include "sparsify/bulk/emu_ops.h"

#include "core/emu/stream.h"
#include "core/error.h"
#include "sparsify/bulk/cpu_ops.h"

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

Tensor EmuOps::view(const Buffer& b) {
  const Tensor& t = storage(b);
  return t.numel() == b.size() ? t : t.slice_flat(0, {b.size()});
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

// Handle and Release calls touch handles only and run here; the others (Wait, and the
// fence) run on the stream, which this thread waits for.
void EmuOps::around(Call& call, FunctionRef run) {
  if (call.op.mode == OpMode::Handle || call.op.mode == OpMode::Release) {
    run();
    return;
  }
  emu::Stream& s = stream();
  s.enqueue([run] { run(); });
  s.synchronize();
}

}  // namespace st::bulk
