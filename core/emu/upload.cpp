// The emulated device's copy engine for InputUploader: one copy stream per uploader (a
// side stream: copies overlap the compute stream's kernels), events to order the two.
#include <cstring>

#include "core/emu/memory.h"
#include "core/emu/stream.h"
#include "core/upload_engine.h"

namespace st {
namespace {

class EmuUploadEngine final : public UploadEngine {
 public:
  explicit EmuUploadEngine(Device device) : device_(device), copy_(device.index, "copy") {}

  Tensor copy_async(const Tensor& host) override {
    if (!host.pinned()) emu::count_pageable_async_copy();
    Tensor d;
    {
      emu::StreamGuard on_copy(copy_);  // the destination is the copy stream's block
      d = Tensor::empty(host.shape(), host.dtype(), device_);
    }
    // Delayed like a kernel (unlike the synchronous copies of core/emu/memory.cpp, which
    // the host waits for anyway): this transfer is what compute must be ordered after,
    // so the delay widens the window a missing wait would leave open. Like a DMA engine
    // it holds addresses, not the tensors: the uploader keeps the host batch alive, and
    // the device block stays the copy stream's, whose order the copy runs in.
    if (host.nbytes() > 0)
      copy_.enqueue([dst = const_cast<void*>(d.block_address()), src = host.raw(),
                     n = host.nbytes()] { std::memcpy(dst, src, n); },
                    true, "copy");
    return d;
  }
  void record_use_on_current(const Tensor& t) override {
    if (t.nbytes() > 0) emu::record_stream(t.block_address(), emu::current_stream(device_.index));
  }
  std::shared_ptr<void> mark() override {
    auto e = std::make_shared<emu::Event>();
    e->record(copy_);
    return e;
  }
  bool reached(const void* mark) override { return event(mark).ready(); }
  void wait_host(const void* mark) override { event(mark).synchronize(); }
  void order_current_after(const void* mark) override {
    emu::current_stream(device_.index).wait(event(mark));
  }

 private:
  static const emu::Event& event(const void* mark) { return *static_cast<const emu::Event*>(mark); }
  Device device_;
  emu::Stream copy_;
};

}  // namespace

std::unique_ptr<UploadEngine> make_emu_upload_engine(Device device) {
  return std::make_unique<EmuUploadEngine>(device);
}

}  // namespace st
