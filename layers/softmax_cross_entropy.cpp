#include "layers/softmax_cross_entropy.h"

#include <cmath>

#include "core/emu/stream.h"
#include "layers/emu_dispatch.h"

namespace st {

float SoftmaxCrossEntropy::forward(const Tensor& logits, const Tensor& labels) {
  ST_CHECK(logits.rank() == 2, "SoftmaxCrossEntropy: expected logits shape [N, K], got ",
           logits.shape());
  ST_CHECK(labels.rank() == 1 && labels.dim(0) == logits.dim(0) && labels.dtype() == DType::I32,
           "SoftmaxCrossEntropy: expected int32 labels shape [", logits.dim(0), "], got ",
           labels.str());
#ifdef SPARSETRAIN_WITH_CUDA
  if (logits.device().is_cuda()) return forward_cuda(logits, labels);
#endif
  if (!logits.device().is_emu()) return forward_host(logits, labels);
  // The loss is a host value: like the CUDA path, the host waits for it.
  float loss = 0;
  emu::run_in_stream_order(
      logits.device().index, "SoftmaxCrossEntropy", [&] { loss = forward_host(logits, labels); },
      /*slow=*/true);
  return loss;
}

float SoftmaxCrossEntropy::forward_host(const Tensor& logits, const Tensor& labels) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  labels_ = labels;
  probs_ = Tensor::empty(logits.shape(), DType::F32, logits.device());
  const float* z = logits.f32();
  const int32_t* y = labels.data<int32_t>();
  float* p = probs_.f32();
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    ST_CHECK(y[i] >= 0 && y[i] < k, "SoftmaxCrossEntropy: label ", y[i], " at row ", i,
             " is outside [0, ", k, ")");
    const float* zi = z + i * k;
    float* pi = p + i * k;
    int64_t arg = 0;
    for (int64_t j = 1; j < k; ++j)
      if (zi[j] > zi[arg]) arg = j;
    const float mx = zi[arg];
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      pi[j] = std::exp(zi[j] - mx);
      sum += pi[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < k; ++j) pi[j] *= inv;
    // -log softmax_y = log(sum) - (z_y - max)
    loss += std::log(sum) - (zi[y[i]] - mx);
    correct += (arg == y[i]);
  }
  correct_ = correct;
  return static_cast<float>(loss / static_cast<double>(n));
}

Tensor SoftmaxCrossEntropy::backward(float scale) {
  ST_CHECK(probs_.defined(), "SoftmaxCrossEntropy::backward called before forward");
#ifdef SPARSETRAIN_WITH_CUDA
  if (probs_.device().is_cuda()) return backward_cuda(scale);
#endif
  if (probs_.device().is_emu())
    return run_on_emu(probs_.device(), [&] { return backward_host(scale); });
  return backward_host(scale);
}

Tensor SoftmaxCrossEntropy::backward_host(float scale) {
  const int64_t n = probs_.dim(0), k = probs_.dim(1);
  Tensor dz = probs_.clone();
  float* g = dz.f32();
  const int32_t* y = labels_.data<int32_t>();
  const float s = scale / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) {
    g[i * k + y[i]] -= 1.0f;
    for (int64_t j = 0; j < k; ++j) g[i * k + j] *= s;
  }
  return dz;
}

}  // namespace st
