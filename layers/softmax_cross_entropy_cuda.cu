// Softmax cross-entropy on CUDA: one warp per row computes the row maximum (first
// index on ties, like the CPU's arg-max), the probabilities, the row loss
// log(sum exp(z - max)) - (z_y - max) and whether the arg-max hits the label. The
// per-row losses come back to the host (forward returns a float, so it must wait
// anyway) and are summed in double, which also lets a bad label be named by row.
#include <cfloat>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/stream.h"
#include "core/cuda/tensor_check.h"
#include "layers/softmax_cross_entropy.h"

namespace st {

namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = cuda::kBlock / kWarp;

// status[i]: 1 correct, 0 wrong, -1 label outside [0, k).
__global__ void softmax_xent_forward_kernel(const float* z, const int32_t* labels, float* probs,
                                            float* row_loss, int32_t* status, int64_t n,
                                            int64_t k) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= n) return;
  const float* zi = z + row * k;
  float* pi = probs + row * k;
  // Arg-max with the lowest index on ties.
  float mx = -FLT_MAX;
  int64_t arg = k;
  for (int64_t j = lane; j < k; j += kWarp) {
    if (zi[j] > mx || arg == k) {
      mx = zi[j];
      arg = j;
    }
  }
  for (int off = kWarp / 2; off > 0; off /= 2) {
    const float om = __shfl_down_sync(0xffffffffu, mx, off);
    const int64_t oa = __shfl_down_sync(0xffffffffu, arg, off);
    if (oa < k && (om > mx || (om == mx && oa < arg) || arg == k)) {
      mx = om;
      arg = oa;
    }
  }
  mx = __shfl_sync(0xffffffffu, mx, 0);
  arg = __shfl_sync(0xffffffffu, arg, 0);
  float sum = 0.0f;
  for (int64_t j = lane; j < k; j += kWarp) {
    const float e = expf(zi[j] - mx);
    pi[j] = e;
    sum += e;
  }
  for (int off = kWarp / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  const float inv = 1.0f / sum;
  for (int64_t j = lane; j < k; j += kWarp) pi[j] *= inv;
  if (lane == 0) {
    const int32_t y = labels[row];
    if (y < 0 || y >= k) {
      status[row] = -1;
      row_loss[row] = 0.0f;
    } else {
      row_loss[row] = logf(sum) - (zi[y] - mx);
      status[row] = arg == y ? 1 : 0;
    }
  }
}

// dz = (softmax - onehot(y)) * scale / N.
__global__ void softmax_xent_backward_kernel(const float* probs, const int32_t* labels, float* dz,
                                             int64_t n, int64_t k, float s) {
  ST_GRID_STRIDE_LOOP(i, n * k) {
    const int64_t row = i / k, j = i % k;
    float g = probs[i];
    if (j == labels[row]) g -= 1.0f;
    dz[i] = g * s;
  }
}

}  // namespace

float SoftmaxCrossEntropy::forward_cuda(const Tensor& logits, const Tensor& labels) {
  const Device device = logits.device();
  cuda::expect_on("SoftmaxCrossEntropy", "logits", logits, device);
  cuda::expect_on("SoftmaxCrossEntropy", "labels", labels, device, DType::I32);
  const int64_t n = logits.dim(0), k = logits.dim(1);
  ST_CHECK(n > 0 && k > 0, "SoftmaxCrossEntropy: empty logits ", logits.shape());
  const int dev = device.index;
  cuda::DeviceGuard guard(dev);
  labels_ = labels;
  probs_ = Tensor::empty(logits.shape(), DType::F32, device);
  Tensor row_loss = Tensor::empty(Shape{n}, DType::F32, device);
  Tensor status = Tensor::empty(Shape{n}, DType::I32, device);
  const unsigned int blocks = static_cast<unsigned int>((n + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_xent_forward_kernel<<<blocks, cuda::kBlock, 0, cuda::current_stream(dev)>>>(
      logits.f32(), labels.data<int32_t>(), probs_.f32(), row_loss.f32(), status.data<int32_t>(), n,
      k);
  ST_CUDA_CHECK_LAUNCH();
  const std::vector<float> losses = row_loss.to_vector();
  const Tensor status_host = status.to(Device::cpu());
  const int32_t* row_status = status_host.data<int32_t>();
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (row_status[i] < 0) {
      const Tensor bad = labels.slice_flat(i, Shape{1}).to(Device::cpu());
      probs_ = Tensor();
      ST_THROW("SoftmaxCrossEntropy: label ", bad.data<int32_t>()[0], " at row ", i,
               " is outside [0, ", k, ")");
    }
    loss += losses[i];
    correct += row_status[i];
  }
  correct_ = correct;
  return static_cast<float>(loss / static_cast<double>(n));
}

Tensor SoftmaxCrossEntropy::backward_cuda(float scale) {
  const Device device = probs_.device();
  const int64_t n = probs_.dim(0), k = probs_.dim(1);
  const int dev = device.index;
  cuda::DeviceGuard guard(dev);
  Tensor dz = Tensor::empty(probs_.shape(), DType::F32, device);
  softmax_xent_backward_kernel<<<cuda::grid_for(n * k), cuda::kBlock, 0,
                                 cuda::current_stream(dev)>>>(
      probs_.f32(), labels_.data<int32_t>(), dz.f32(), n, k, scale / static_cast<float>(n));
  ST_CUDA_CHECK_LAUNCH();
  return dz;
}

}  // namespace st
