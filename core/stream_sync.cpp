#include "core/stream_sync.h"

#include "core/emu/stream.h"
#ifdef SPARSETRAIN_WITH_CUDA
#include "core/cuda/stream.h"
#endif

namespace st {

void synchronize_current_stream(Device d) {
  if (d.is_emu()) return emu::current_stream(d.index).synchronize();
#ifdef SPARSETRAIN_WITH_CUDA
  if (d.is_cuda()) cuda::context(d.index).synchronize();
#endif
}

StreamPosition StreamPosition::record_current(Device d) {
  StreamPosition p;
  if (d.is_emu()) {
    auto ev = std::make_shared<emu::Event>();
    ev->record(emu::current_stream(d.index));
    p.event_ = ev;
    p.wait_ = [](const void* e) { static_cast<const emu::Event*>(e)->synchronize(); };
  }
#ifdef SPARSETRAIN_WITH_CUDA
  if (d.is_cuda()) {
    auto ev = std::make_shared<cuda::Event>(d.index);
    ev->record(cuda::current_stream(d.index));
    p.event_ = ev;
    p.wait_ = [](const void* e) { static_cast<const cuda::Event*>(e)->synchronize(); };
  }
#endif
  return p;
}

void StreamPosition::wait() const {
  if (wait_) wait_(event_.get());
}

}  // namespace st
