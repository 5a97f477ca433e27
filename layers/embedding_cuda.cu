// Embedding on CUDA. Forward gathers rows; an id outside [0, num_embeddings) yields a
// zero row and is reported by the first bad position (read back once per forward, so
// the error names the position and id as the CPU's does).
//
// Backward is a deterministic scatter-add: the positions are sorted by token id with
// CUB's radix sort (stable, so equal ids keep their position order) and each run of
// equal ids is summed by one block, in position order, into dW[id]. That is the CPU
// loop's order of additions (dW[id] += dy[i] for i ascending), so dW is bit-identical to
// the CPU's, and repeated ids never race (no atomics on dW).
#include <cub/device/device_radix_sort.cuh>

#include <climits>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "layers/embedding.h"

namespace st {

namespace {

constexpr unsigned long long kNoBadId = ULLONG_MAX;

__global__ void gather_kernel(const int32_t* ids, const float* w, float* y, int64_t n, int64_t dim,
                              int64_t rows, unsigned long long* first_bad) {
  ST_GRID_STRIDE_LOOP(e, n * dim) {
    const int64_t i = e / dim, j = e % dim;
    const int32_t id = ids[i];
    if (id < 0 || id >= rows) {
      y[e] = 0.0f;
      if (j == 0) atomicMin(first_bad, static_cast<unsigned long long>(i));
    } else {
      y[e] = w[static_cast<int64_t>(id) * dim + j];
    }
  }
}

__global__ void iota_kernel(int32_t* v, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) v[i] = static_cast<int32_t>(i);
}

// One block per run of equal ids in `keys` (sorted): threads split the columns, each
// sums its column over the run's positions in order. Blocks that do not start a run
// return at once.
__global__ void scatter_add_sorted_kernel(const int32_t* keys, const int32_t* positions,
                                          const float* dy, float* dw, int64_t n, int64_t dim,
                                          bool square) {
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) {
    const int32_t id = keys[s];
    if (s > 0 && keys[s - 1] == id) continue;
    float* row = dw + static_cast<int64_t>(id) * dim;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
      float acc = row[j];
      for (int64_t r = s; r < n && keys[r] == id; ++r) {
        const float d = dy[static_cast<int64_t>(positions[r]) * dim + j];
        acc += square ? d * d : d;
      }
      row[j] = acc;
    }
  }
}

// Bits needed for keys in [0, rows): the radix sort skips the always-zero high bits.
int key_bits(int64_t rows) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < rows) ++bits;
  return bits;
}

}  // namespace

Tensor Embedding::forward_cuda(const Tensor& x) {
  const Shape out_shape = output_shape(x);
  const Device device = x.device();
  cuda::expect_on(describe(), "token ids", x, device, DType::I32);
  cuda::expect_on(describe(), "weight", weight_->value, device);
  const int64_t n = x.numel();
  ST_CHECK(n <= INT_MAX, describe(), ": ", n, " token ids exceed the int32 position range");
  const int dev = device.index;
  cuda::DeviceGuard guard(dev);
  const cudaStream_t stream = cuda::current_stream(dev);
  ids_ = x;
  Tensor y = Tensor::empty(out_shape, DType::F32, device);
  if (n == 0) return y;
  Tensor flag = Tensor::empty(Shape{1}, DType::I64, device);
  auto* first_bad = static_cast<unsigned long long*>(flag.raw());
  ST_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xFF, sizeof(unsigned long long), stream));
  gather_kernel<<<cuda::grid_for(n * dim_), cuda::kBlock, 0, stream>>>(
      x.data<int32_t>(), weight_->value.f32(), y.f32(), n, dim_, num_, first_bad);
  ST_CUDA_CHECK_LAUNCH();
  unsigned long long bad = kNoBadId;
  cuda::copy_bytes(&bad, Device::cpu(), first_bad, device, sizeof bad);
  if (bad != kNoBadId) {
    const Tensor id = x.slice_flat(static_cast<int64_t>(bad), Shape{1}).to(Device::cpu());
    ST_THROW(describe(), ": token id ", id.data<int32_t>()[0], " at position ", bad,
             " is outside [0, ", num_, ")");
  }
  return y;
}

Tensor Embedding::backward_cuda(const Tensor& dy) {
  ST_CHECK(ids_.defined(), describe(), ": backward called before forward");
  expect_shape("gradient", output_shape(ids_), dy.shape());
  const Device device = ids_.device();
  cuda::expect_on(describe(), "gradient", dy, device);
  cuda::expect_on(describe(), "weight gradient", weight_->grad, device);
  const int64_t n = ids_.numel();
  if (n > 0) {
    const int dev = device.index;
    cuda::DeviceGuard guard(dev);
    const cudaStream_t stream = cuda::current_stream(dev);
    Tensor keys = Tensor::empty(Shape{n}, DType::I32, device);
    Tensor positions_in = Tensor::empty(Shape{n}, DType::I32, device);
    Tensor positions = Tensor::empty(Shape{n}, DType::I32, device);
    iota_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, stream>>>(positions_in.data<int32_t>(), n);
    ST_CUDA_CHECK_LAUNCH();
    const int items = static_cast<int>(n);  // forward checked the range
    const int bits = key_bits(num_);
    size_t temp_bytes = 0;
    ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, temp_bytes, ids_.data<int32_t>(), keys.data<int32_t>(),
        positions_in.data<int32_t>(), positions.data<int32_t>(), items, 0, bits, stream));
    Tensor temp =
        Tensor::empty(Shape{static_cast<int64_t>((temp_bytes + 7) / 8)}, DType::I64, device);
    ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        temp.raw(), temp_bytes, ids_.data<int32_t>(), keys.data<int32_t>(),
        positions_in.data<int32_t>(), positions.data<int32_t>(), items, 0, bits, stream));
    constexpr int kThreads = 128;
    scatter_add_sorted_kernel<<<cuda::grid_for(n, 1), kThreads, 0, stream>>>(
        keys.data<int32_t>(), positions.data<int32_t>(), dy.f32(), weight_->grad.f32(), n, dim_,
        false);
    ST_CUDA_CHECK_LAUNCH();
    if (weight_->sq_grad.defined()) {  // per-lookup squares, as the CPU adds them
      scatter_add_sorted_kernel<<<cuda::grid_for(n, 1), kThreads, 0, stream>>>(
          keys.data<int32_t>(), positions.data<int32_t>(), dy.f32(), weight_->sq_grad.f32(), n,
          dim_, true);
      ST_CUDA_CHECK_LAUNCH();
    }
  }
  weight_->mark_grad_ready();
  return Tensor();
}

}  // namespace st
