#include "layers/bce_with_logits.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace st {

float BceWithLogits::forward(const Tensor& logits, const Tensor& labels) {
  const int64_t n = labels.numel();
  ST_CHECK(labels.device().is_cpu() && labels.dtype() == DType::F32 && labels.rank() == 1,
           "BceWithLogits: labels must be float [N] on the host, got ", labels.str());
  ST_CHECK(logits.numel() == n && (logits.rank() == 1 || logits.rank() == 2),
           "BceWithLogits: logits ", logits.str(), " do not match labels ", labels.str());
  ST_CHECK(n > 0, "BceWithLogits: empty batch");
  shape_ = logits.shape();
  device_ = logits.device();
  const Tensor z = logits.to(Device::cpu());
  residual_ = Tensor::empty(Shape{n});
  const float* zp = z.f32();
  const float* yp = labels.f32();
  float* r = residual_.f32();
  double sum = 0;
  correct_ = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double zi = zp[i], yi = yp[i];
    // max(z, 0) - z y + log(1 + exp(-|z|)): no overflow for any z.
    sum += std::max(zi, 0.0) - zi * yi + std::log1p(std::exp(-std::fabs(zi)));
    r[i] = static_cast<float>(1.0 / (1.0 + std::exp(-zi)) - yi);
    correct_ += (zi > 0) == (yi > 0.5) ? 1 : 0;
  }
  return static_cast<float>(sum / static_cast<double>(n));
}

Tensor BceWithLogits::backward() const {
  ST_CHECK(residual_.defined(), "BceWithLogits: backward without a forward");
  const int64_t n = residual_.numel();
  Tensor g = Tensor::empty(shape_);
  const float* r = residual_.f32();
  float* gp = g.f32();
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) gp[i] = r[i] * inv_n;
  return g.to(device_);
}

}  // namespace st
