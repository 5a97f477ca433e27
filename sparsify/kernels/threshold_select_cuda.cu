#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_select.cuh>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/storage.h"
#include "sparsify/kernels/threshold_select_cuda.h"

namespace st::select {

namespace {
// Keeps position i when |x[i]| >= tau (the rule's one comparison, part::passes).
struct PassesThreshold {
  const float* x;
  float tau;
  __device__ bool operator()(int32_t i) const { return part::passes(x[i], tau); }
};
}  // namespace

int64_t threshold_select_cuda(const float* x, part::Range owned, float tau, int64_t t,
                              int32_t* out) {
  const int64_t n = owned.size();
  if (n <= 0) return 0;
  const int dev = cuda::device_of(x);
  cuda::DeviceGuard guard(dev);
  const cudaStream_t stream = cuda::current_stream(dev);
  thrust::counting_iterator<int32_t> positions(static_cast<int32_t>(owned.begin));
  const PassesThreshold pred{x, tau};
  size_t temp_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceSelect::If(nullptr, temp_bytes, positions, out,
                                      static_cast<int64_t*>(nullptr), n, pred, stream));
  // One scratch allocation: CUB's temporary storage, then the selected count.
  const size_t count_offset = (temp_bytes + 255) / 256 * 256;
  Storage scratch(count_offset + sizeof(int64_t), Device::cuda(dev));
  int64_t* count = reinterpret_cast<int64_t*>(static_cast<char*>(scratch.data()) + count_offset);
  ST_CUDA_CHECK(
      cub::DeviceSelect::If(scratch.data(), temp_bytes, positions, out, count, n, pred, stream));
  int64_t selected = 0;
  cuda::copy_bytes(&selected, Device::cpu(), count, Device::cuda(dev), sizeof(int64_t));
  if (selected == 0) {
    // Nothing passed: the one fallback element, as on the CPU.
    const int32_t j = static_cast<int32_t>(part::fallback_index(owned, t));
    cuda::copy_bytes(out, Device::cuda(dev), &j, Device::cpu(), sizeof(int32_t));
    selected = 1;
  }
  return selected;
}

}  // namespace st::select
