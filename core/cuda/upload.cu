// InputUploader on CUDA (the design is in core/upload.h).
#include <cstdio>
#include <deque>
#include <exception>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "core/upload.h"

namespace st {

struct InputUploader::Impl {
  struct InFlight {
    uint64_t id;
    std::vector<Tensor> host;  // kept until `done`
    cuda::Event done;          // recorded on the copy stream after the copies
  };
  std::deque<InFlight> flights;  // in copy-stream order, so they complete front first
  uint64_t next_id = 1;

  // Releases the host tensors of the copies that have completed.
  void collect() {
    while (!flights.empty() && flights.front().done.ready()) flights.pop_front();
  }
};

InputUploader::InputUploader(Device device) : device_(device) {
  if (device.is_cuda()) impl_ = std::make_unique<Impl>();
}

InputUploader::~InputUploader() {
  if (!impl_) return;
  for (Impl::InFlight& f : impl_->flights) {
    try {
      f.done.synchronize();
    } catch (const std::exception& e) {  // a destructor must not throw
      std::fprintf(stderr, "sparsetrain: input copy failed: %s\n", e.what());
    }
  }
}

InputUploader::Pending InputUploader::start(const std::vector<Tensor>& host) {
  if (device_.is_cpu()) return Pending{host, 0};
  const int dev = device_.index;
  cuda::DeviceGuard guard(dev);
  cuda::Context& ctx = cuda::context(dev);
  const cudaStream_t compute = ctx.stream();
  const cuda::Stream& side = ctx.copy_stream();
  Pending p;
  {
    cuda::StreamGuard on_side(side);  // the destinations are the copy stream's blocks
    for (const Tensor& h : host) {
      ST_CHECK(h.device().is_cpu(), "InputUploader: ", h.str(), " is not a host tensor");
      Tensor d = Tensor::empty(h.shape(), h.dtype(), device_);
      if (h.nbytes() > 0) {
        ST_CUDA_CHECK(
            cudaMemcpyAsync(d.raw(), h.raw(), h.nbytes(), cudaMemcpyHostToDevice, side.get()));
        cuda::record_stream(d, compute);
      }
      p.tensors.push_back(d);
    }
  }
  cuda::Event done(dev);
  done.record(side);
  impl_->collect();
  p.id = impl_->next_id++;
  impl_->flights.push_back(Impl::InFlight{p.id, host, std::move(done)});
  return p;
}

std::vector<Tensor> InputUploader::finish(Pending pending) {
  if (device_.is_cpu()) return std::move(pending.tensors);
  cuda::DeviceGuard guard(device_.index);
  impl_->collect();
  // A copy no longer in flight has completed: nothing to wait for.
  for (const Impl::InFlight& f : impl_->flights)
    if (f.id == pending.id) f.done.block(cuda::current_stream(device_.index));
  return std::move(pending.tensors);
}

}  // namespace st
