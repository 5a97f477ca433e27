// The CUDA copy engine for InputUploader (the orchestration is core/upload.cpp): copies
// on the thread's copy stream (cuda::Context::copy_stream), events to order compute.
#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/upload_engine.h"

namespace st {
namespace {

class CudaUploadEngine final : public UploadEngine {
 public:
  explicit CudaUploadEngine(Device device) : device_(device) {}

  Tensor copy_async(const Tensor& host) override {
    cuda::DeviceGuard guard(device_.index);
    cuda::Context& ctx = cuda::context(device_.index);
    const cuda::Stream& side = ctx.copy_stream();
    cuda::StreamGuard on_side(side);  // the destination is the copy stream's block
    Tensor d = Tensor::empty(host.shape(), host.dtype(), device_);
    if (host.nbytes() > 0)
      ST_CUDA_CHECK(
          cudaMemcpyAsync(d.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, side.get()));
    return d;
  }
  void record_use_on_current(const Tensor& t) override {
    cuda::DeviceGuard guard(device_.index);
    cuda::record_stream(t, cuda::current_stream(device_.index));
  }
  std::shared_ptr<void> mark() override {
    cuda::DeviceGuard guard(device_.index);
    auto e = std::make_shared<cuda::Event>(device_.index);
    e->record(cuda::context(device_.index).copy_stream());
    return e;
  }
  bool reached(const void* mark) override { return event(mark).ready(); }
  void wait_host(const void* mark) override { event(mark).synchronize(); }
  void order_current_after(const void* mark) override {
    cuda::DeviceGuard guard(device_.index);
    event(mark).block(cuda::current_stream(device_.index));
  }

 private:
  static const cuda::Event& event(const void* mark) {
    return *static_cast<const cuda::Event*>(mark);
  }
  Device device_;
};

}  // namespace

std::unique_ptr<UploadEngine> make_cuda_upload_engine(Device device) {
  return std::make_unique<CudaUploadEngine>(device);
}

}  // namespace st
