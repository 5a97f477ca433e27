// What the CudaOps translation units share: launch on the current stream, CUB's
// two-phase temporary storage, argument checks. Included by sparsify/bulk/cuda_ops*.cu only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/error.h"
#include "core/storage.h"
#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/partition_math.h"

namespace st::bulk::detail {

// Grid-stride launch of `kernel` over n elements on `stream` (nothing for n <= 0).
template <typename Kernel, typename... Args>
void launch(int64_t n, cudaStream_t stream, Kernel kernel, Args... args) {
  if (n <= 0) return;
  kernel<<<cuda::grid_for(n), cuda::kBlock, 0, stream>>>(args..., n);
  ST_CUDA_CHECK_LAUNCH();
}

inline DType dtype_for(Elem e) {
  return e == Elem::F32 ? DType::F32 : DType::I32;
}

inline size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Device scratch from the caching allocator, carved into 256-byte aligned pieces. The
// block is keyed to the current stream, so freeing it at the end of a call while the
// stream still uses it is safe (it is handed out again only in that stream's order).
class Scratch {
 public:
  Scratch(size_t bytes, int device) : mem_(bytes > 0 ? bytes : 1, Device::cuda(device)) {}
  template <typename T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(mem_.data()) + offset);
  }

 private:
  Storage mem_;
};

// Bits needed for positions in [0, domain): the radix sorts look at no more.
inline int position_bits(int64_t domain) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < domain) ++bits;
  return bits;
}

}  // namespace st::bulk::detail
