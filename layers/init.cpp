#include "layers/init.h"

namespace st::init {

void uniform(Tensor& t, float bound, Rng& rng) {
  ST_CHECK(t.device().is_cpu(), "init::uniform: initialise on the CPU, then move to ",
           t.device().str());
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = (2.0f * rng.uniform() - 1.0f) * bound;
}

void normal(Tensor& t, float stddev, Rng& rng) {
  ST_CHECK(t.device().is_cpu(), "init::normal: initialise on the CPU, then move to ",
           t.device().str());
  float* p = t.f32();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = rng.normal() * stddev;
}

}  // namespace st::init
