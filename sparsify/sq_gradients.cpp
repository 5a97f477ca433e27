#include "sparsify/sq_gradients.h"

#include "core/emu/launch.h"
#include "core/error.h"

namespace st {

void sq_grad_fallback(const float* g, int64_t n, int64_t batch, float* out) {
  const float inv = 1.0f / static_cast<float>(batch);
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] * g[i] * inv;
}

SqGradients::SqGradients(FlatParams& flat, int64_t batch_per_rank)
    : flat_(flat), batch_(batch_per_rank) {
  ST_CHECK(batch_ >= 1, "SqGradients: batch size must be >= 1, got ", batch_);
  // The per-sample sums come from the CPU layers' code (Conv2d::accumulate_sq_grads,
  // Linear): on the CPU and on the emulated device, which runs that code; the CUDA layers
  // do not compute them.
  ST_CHECK(!flat.grads().device().is_cuda(),
           "variance-based compression needs per-sample squared-gradient sums, which only the "
           "CPU layers compute; got ",
           flat.grads().str(), " (train it with --device cpu)");
  flat_sq_ = Tensor::zeros({flat.numel()}, DType::F32, flat.grads().device());
  for (Param* p : flat.params())
    if (p->provides_sq_grad) p->sq_grad = flat_sq_.slice_flat(flat.offset(*p), p->grad.shape());
}

SqGradients::~SqGradients() {
  for (Param* p : flat_.params()) p->sq_grad = Tensor();
}

Tensor SqGradients::bucket(const Bucket& b) {
  Tensor slice = flat_sq_.slice_flat(b.offset, Shape{b.numel});
  for (const Param* p : b.params) {
    if (p->provides_sq_grad) continue;
    Tensor out = flat_sq_.slice_flat(flat_.offset(*p), Shape{p->grad.numel()});
    if (out.device().is_emu()) {  // device work on the calling (communication) thread's stream
      emu::launch(out.device().index, [g = p->grad, out, batch = batch_] {
        sq_grad_fallback(g.as_host_memory().f32(), g.numel(), batch, out.as_host_memory().f32());
      });
    } else {
      sq_grad_fallback(p->grad.f32(), p->grad.numel(), batch_, out.f32());
    }
  }
  return slice;
}

}  // namespace st
