// InputUploader (design in core/upload.h), written once for every accelerator over its
// UploadEngine.
#include "core/upload.h"

#include <cstdio>
#include <deque>
#include <exception>

#include "core/upload_engine.h"

namespace st {

struct InputUploader::Impl {
  std::unique_ptr<UploadEngine> engine;
  struct InFlight {
    uint64_t id;
    std::vector<Tensor> host;    // kept until `done` is reached
    std::shared_ptr<void> done;  // on the copy stream, after the batch's copies
  };
  std::deque<InFlight> flights;  // in copy-stream order, so they complete front first
  uint64_t next_id = 1;

  // Releases the host tensors of the copies that have completed.
  void collect() {
    while (!flights.empty() && engine->reached(flights.front().done.get())) flights.pop_front();
  }
};

InputUploader::InputUploader(Device device) : device_(device) {
  if (device.is_cpu()) return;
  impl_ = std::make_unique<Impl>();
  impl_->engine =
      device.is_emu() ? make_emu_upload_engine(device) : make_cuda_upload_engine(device);
}

InputUploader::~InputUploader() {
  if (!impl_) return;
  for (Impl::InFlight& f : impl_->flights) {
    try {
      impl_->engine->wait_host(f.done.get());
    } catch (const std::exception& e) {  // a destructor must not throw
      std::fprintf(stderr, "sparsetrain: input copy failed: %s\n", e.what());
    }
  }
}

InputUploader::Pending InputUploader::start(const std::vector<Tensor>& host) {
  if (!impl_) return Pending{host, 0};
  Pending p;
  for (const Tensor& h : host) {
    ST_CHECK(h.device().is_cpu(), "InputUploader: ", h.str(), " is not a host tensor");
    p.tensors.push_back(impl_->engine->copy_async(h));
  }
  std::shared_ptr<void> done = impl_->engine->mark();
  impl_->collect();
  p.id = impl_->next_id++;
  impl_->flights.push_back(Impl::InFlight{p.id, host, std::move(done)});
  return p;
}

std::vector<Tensor> InputUploader::finish(Pending pending) {
  if (!impl_) return std::move(pending.tensors);
  impl_->collect();
  // A copy no longer in flight has completed: nothing to wait for.
  for (const Impl::InFlight& f : impl_->flights)
    if (f.id == pending.id) impl_->engine->order_current_after(f.done.get());
  // The batch's blocks belong to the copy stream; the stream that reads them is the
  // caller's current one, known only here (before, the copy recorded its own stream,
  // which the allocator ignores: the block could go to the next batch while compute
  // still read it).
  for (const Tensor& t : pending.tensors) impl_->engine->record_use_on_current(t);
  return std::move(pending.tensors);
}

}  // namespace st
