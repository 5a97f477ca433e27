#include "core/storage.h"

#include <cstdlib>

#include "core/error.h"

namespace st {

namespace {
constexpr size_t kCpuAlignment = 64;
}

Storage::Storage(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    ptr_ = std::aligned_alloc(kCpuAlignment, rounded);
    ST_CHECK(ptr_ != nullptr, "out of host memory allocating ", bytes, " bytes");
  } else {
    ptr_ = cuda::device_alloc(bytes, device.index);
  }
}

Storage::~Storage() {
  if (!ptr_) return;
  if (device_.is_cpu()) {
    std::free(ptr_);
  } else {
    cuda::device_free(ptr_, device_.index);
  }
}

}  // namespace st
