// InputUploader without the CUDA backend: only the CPU, where nothing is copied.
#include "core/upload.h"

namespace st {

struct InputUploader::Impl {};

InputUploader::InputUploader(Device device) : device_(device) {
  ST_CHECK(device.is_cpu(), "InputUploader: this sparsetrain was built without CUDA support (",
           device.str(), ")");
}

InputUploader::~InputUploader() = default;

InputUploader::Pending InputUploader::start(const std::vector<Tensor>& host) {
  return Pending{host, 0};
}

std::vector<Tensor> InputUploader::finish(Pending pending) {
  return std::move(pending.tensors);
}

}  // namespace st
