#include "sparsify/sq_gradients.h"

#include "core/error.h"

namespace st {

void sq_grad_fallback(const float* g, int64_t n, int64_t batch, float* out) {
  const float inv = 1.0f / static_cast<float>(batch);
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] * g[i] * inv;
}

SqGradients::SqGradients(FlatParams& flat, int64_t batch_per_rank)
    : flat_(flat), batch_(batch_per_rank) {
  ST_CHECK(batch_ >= 1, "SqGradients: batch size must be >= 1, got ", batch_);
  ST_CHECK(flat.grads().device().is_cpu(),
           "variance-based compression needs CPU gradients (per-sample squared-gradient sums "
           "are computed by the CPU layers); got ",
           flat.grads().str());
  flat_sq_ = Tensor::zeros({flat.numel()});
  for (Param* p : flat.params())
    if (p->provides_sq_grad) p->sq_grad = flat_sq_.slice_flat(flat.offset(*p), p->grad.shape());
}

SqGradients::~SqGradients() {
  for (Param* p : flat_.params()) p->sq_grad = Tensor();
}

Tensor SqGradients::bucket(const Bucket& b) {
  Tensor slice = flat_sq_.slice_flat(b.offset, Shape{b.numel});
  for (const Param* p : b.params)
    if (!p->provides_sq_grad)
      sq_grad_fallback(p->grad.f32(), p->grad.numel(), batch_,
                       slice.f32() + (flat_.offset(*p) - b.offset));
  return slice;
}

}  // namespace st
