#include "sparsify/vgc_cuda.h"

#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <cstring>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/storage.h"
#include "sparsify/quant_math.h"

namespace st::vgc {

namespace {

// The test per element: v updated, flag = sent, sent_abs = |x| when sent (else 0).
__global__ void test_kernel(const float* x, const float* aux, const float* grad, int64_t n,
                            float inv_batch, float alpha, float zeta, float tau, float* v,
                            char* flag, float* sent_abs) {
  ST_GRID_STRIDE_LOOP(i, n) {
    const float add = aux ? aux[i] : grad[i] * grad[i] * inv_batch;
    const float vi = v[i] + add;
    const float r = x[i];
    const bool send = r * r > alpha * vi || (tau > 0 && fabsf(r) > tau);
    v[i] = send ? 0.0f : vi * zeta;
    flag[i] = send ? 1 : 0;
    sent_abs[i] = send ? fabsf(r) : 0.0f;
  }
}

__global__ void pack_kernel(const float* x, const int32_t* idx, int64_t m, float scale, int ib,
                            uint32_t* packed, float* values) {
  ST_GRID_STRIDE_LOOP(j, m) {
    const uint32_t w = quant::vgc_encode(idx[j], x[idx[j]], scale, ib);
    packed[j + 1] = w;
    values[j] = quant::vgc_value(w, scale, ib);
  }
}

__global__ void unpack_kernel(const uint32_t* words, int64_t m, int ib, int32_t* idx,
                              float* values) {
  const float scale = __uint_as_float(words[0]);
  ST_GRID_STRIDE_LOOP(j, m) {
    idx[j] = quant::vgc_index(words[j + 1], ib);
    values[j] = quant::vgc_value(words[j + 1], scale, ib);
  }
}

}  // namespace

int64_t test_cuda(const float* x, const float* aux, const float* grad, int64_t n, float inv_batch,
                  float alpha, float zeta, float tau, float* v, int32_t* out, float* max_sent) {
  *max_sent = 0.0f;
  if (n <= 0) return 0;
  cuda::OnDeviceOf on(x);
  thrust::counting_iterator<int32_t> positions(0);
  size_t select_bytes = 0, max_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, select_bytes, positions,
                                           static_cast<const char*>(nullptr), out,
                                           static_cast<int64_t*>(nullptr), n, on.stream));
  ST_CUDA_CHECK(cub::DeviceReduce::Max(nullptr, max_bytes, static_cast<const float*>(nullptr),
                                       static_cast<float*>(nullptr), n, on.stream));
  const size_t flags = cuda::align256(static_cast<size_t>(n)),
               absv = cuda::align256(4 * static_cast<size_t>(n));
  const size_t temp = cuda::align256(std::max(select_bytes, max_bytes));
  Storage scratch(flags + absv + temp + 16, Device::cuda(on.dev));
  char* base = static_cast<char*>(scratch.data());
  char* flag = base;
  float* sent_abs = reinterpret_cast<float*>(base + flags);
  void* temp_ptr = base + flags + absv;
  auto* count_dev = reinterpret_cast<int64_t*>(base + flags + absv + temp);
  auto* max_dev = reinterpret_cast<float*>(base + flags + absv + temp + 8);
  test_kernel<<<cuda::grid_for(n), cuda::kBlock, 0, on.stream>>>(x, aux, grad, n, inv_batch, alpha,
                                                                 zeta, tau, v, flag, sent_abs);
  ST_CUDA_CHECK_LAUNCH();
  ST_CUDA_CHECK(cub::DeviceSelect::Flagged(temp_ptr, select_bytes, positions, flag, out, count_dev,
                                           n, on.stream));
  ST_CUDA_CHECK(cub::DeviceReduce::Max(temp_ptr, max_bytes, sent_abs, max_dev, n, on.stream));
  ST_CUDA_CHECK(cudaStreamSynchronize(on.stream));
  int64_t count = 0;
  cuda::copy_bytes(&count, Device::cpu(), count_dev, Device::cuda(on.dev), sizeof(int64_t));
  cuda::copy_bytes(max_sent, Device::cpu(), max_dev, Device::cuda(on.dev), sizeof(float));
  return count;
}

void pack_cuda(const float* x, const int32_t* idx, int64_t m, float scale, int index_bits,
               uint32_t* packed, float* values) {
  cuda::OnDeviceOf on(packed);
  uint32_t head;
  std::memcpy(&head, &scale, 4);
  ST_CUDA_CHECK(cudaMemcpyAsync(packed, &head, 4, cudaMemcpyHostToDevice, on.stream));
  ST_CUDA_CHECK(cudaStreamSynchronize(on.stream));  // `head` lives on this stack frame
  if (m <= 0) return;
  pack_kernel<<<cuda::grid_for(m), cuda::kBlock, 0, on.stream>>>(x, idx, m, scale, index_bits,
                                                                 packed, values);
  ST_CUDA_CHECK_LAUNCH();
}

void unpack_cuda(const uint32_t* words, int64_t count, int index_bits, int32_t* idx,
                 float* values) {
  if (count <= 1) return;
  cuda::OnDeviceOf on(words);
  unpack_kernel<<<cuda::grid_for(count - 1), cuda::kBlock, 0, on.stream>>>(words, count - 1,
                                                                           index_bits, idx, values);
  ST_CUDA_CHECK_LAUNCH();
}

}  // namespace st::vgc
