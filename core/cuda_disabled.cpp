// Compiled only when the CUDA backend is off: every CUDA entry point fails loudly
// (Caffe's NO_GPU idea), so a CPU-only binary can never silently skip GPU work.
#include "core/device.h"
#include "core/error.h"
#include "core/storage.h"

namespace st {

bool cuda_built() {
  return false;
}
int cuda_device_count() {
  return 0;
}

namespace cuda {
namespace {
[[noreturn]] void no_cuda() {
  ST_THROW("this sparsetrain was built without CUDA support");
}
}  // namespace
void* device_alloc(size_t, int) {
  no_cuda();
}
void device_free(void*, int) {}
void copy_bytes(void*, Device, const void*, Device, size_t) {
  no_cuda();
}
void zero_bytes(void*, size_t, int) {
  no_cuda();
}
void* pinned_alloc(size_t) {
  no_cuda();
}
void pinned_free(void*) {}
void set_thread_device(int) {
  no_cuda();
}
}  // namespace cuda

}  // namespace st
