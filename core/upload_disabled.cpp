// A build without the CUDA backend: the uploader has no CUDA copy engine.
#include "core/upload_engine.h"

namespace st {

std::unique_ptr<UploadEngine> make_cuda_upload_engine(Device device) {
  ST_CHECK(false, "InputUploader: this sparsetrain was built without CUDA support (", device.str(),
           ")");
  return nullptr;
}

}  // namespace st
