#include "core/storage.h"

#include <cstdlib>

#include "core/error.h"
#include "core/host_allocator.h"

namespace st {

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    ptr_ = host::allocate(bytes);
  } else {
    ptr_ = cuda::device_alloc(bytes, device.index);
  }
}

Storage::~Storage() {
  if (!ptr_) return;
  if (device_.is_cpu()) {
    host::release(ptr_, bytes_);
  } else {
    cuda::device_free(ptr_, device_.index);
  }
}

}  // namespace st
