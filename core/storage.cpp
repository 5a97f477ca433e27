#include "core/storage.h"

#include <cstdlib>

#include "core/emu/memory.h"
#include "core/error.h"
#include "core/host_allocator.h"

namespace st {

Storage::Storage(size_t bytes, Device device, bool pinned)
    : bytes_(bytes), device_(device), pinned_(pinned) {
  ST_CHECK(!pinned || device.is_cpu(), "Storage: only host memory can be page-locked, not ",
           device.str());
  if (bytes == 0) return;
  if (pinned) {
    ptr_ = host::allocate_pinned(bytes);
  } else if (device.is_cpu()) {
    ptr_ = host::allocate(bytes);
  } else if (device.is_emu()) {
    ptr_ = emu::device_alloc(bytes, device.index);
  } else {
    ptr_ = cuda::device_alloc(bytes, device.index);
  }
}

std::shared_ptr<Storage> Storage::borrow(void* ptr, size_t bytes, Device device) {
  std::shared_ptr<Storage> s(new Storage());
  s->ptr_ = ptr;
  s->bytes_ = bytes;
  s->device_ = device;
  s->owned_ = false;
  return s;
}

Storage::~Storage() {
  if (!ptr_ || !owned_) return;
  if (pinned_) {
    host::release_pinned(ptr_, bytes_);
  } else if (device_.is_cpu()) {
    host::release(ptr_, bytes_);
  } else if (device_.is_emu()) {
    emu::device_free(ptr_);
  } else {
    cuda::device_free(ptr_, device_.index);
  }
}

}  // namespace st
