#include "layers/dropout.h"

#include "core/kernels/math.h"
#include "core/rng.h"

namespace st {

namespace {

// out[i] = keep(i) ? in[i] * scale : 0 over n elements, keep(i) as math::dropout_keep.
// One Philox block gives the uniforms of four consecutive elements (philox_uniform uses
// word i & 3 of block i >> 2), so computing it once per four elements gives the same
// mask as the per-element rule at a quarter of the cost; forward and backward (which
// redraws the forward's mask) share this loop.
void apply_mask(const float* in, float* out, int64_t n, uint64_t seed, uint64_t stream, float p) {
  const float scale = 1.0f / (1.0f - p);
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for if (n > 32768) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const Philox4 r = philox_block(seed, stream, static_cast<uint64_t>(b));
    const int64_t first = 4 * b;
    const int64_t count = n - first < 4 ? n - first : 4;
    for (int64_t j = 0; j < count; ++j)
      out[first + j] = math::dropout_keeps_word(r.v[j], p) ? in[first + j] * scale : 0.0f;
  }
}

}  // namespace

Dropout::Dropout(float p, uint64_t seed) : p_(p), seed_(seed) {
  ST_CHECK(p >= 0.0f && p < 1.0f, "Dropout: probability must be in [0, 1), got ", p);
}

uint64_t Dropout::next_stream() {
  if (!frozen_) stream_ = calls_++;
  return stream_;
}

Tensor Dropout::forward_cpu(const Tensor& x) {
  shape_ = x.shape();
  if (!training_ || p_ == 0.0f) return x;
  const uint64_t stream = next_stream();
  Tensor y = Tensor::empty(x.shape());
  apply_mask(x.f32(), y.f32(), x.numel(), seed_, stream, p_);
  return y;
}

Tensor Dropout::backward_cpu(const Tensor& dy) {
  expect_shape("gradient", shape_, dy.shape());
  if (!training_ || p_ == 0.0f) return dy;
  Tensor dx = Tensor::empty(dy.shape());
  apply_mask(dy.f32(), dx.f32(), dy.numel(), seed_, stream_, p_);
  return dx;
}

std::vector<uint64_t> dropout_calls(Layer& model) {
  std::vector<uint64_t> calls;
  model.visit_layers([&](Layer& l) {
    if (auto* d = dynamic_cast<Dropout*>(&l)) calls.push_back(d->calls());
  });
  return calls;
}

void set_dropout_calls(Layer& model, const std::vector<uint64_t>& calls) {
  const size_t layers = dropout_calls(model).size();
  ST_CHECK(layers == calls.size(), "the model has ", layers, " Dropout layers but ", calls.size(),
           " mask counts were given");
  size_t i = 0;
  model.visit_layers([&](Layer& l) {
    if (auto* d = dynamic_cast<Dropout*>(&l)) d->set_calls(calls[i++]);
  });
}

void seed_dropout_for_rank(Layer& model, int rank) {
  // A Weyl step per rank by an odd constant other than the golden ratio's (which the
  // models use to derive a Dropout's seed from the build seed), so rank r's seed is not
  // the seed of another build.
  model.visit_layers([&](Layer& l) {
    if (auto* d = dynamic_cast<Dropout*>(&l))
      d->set_seed(d->seed() + static_cast<uint64_t>(rank) * 0xD1B54A32D192ED03ull);
  });
}

}  // namespace st
