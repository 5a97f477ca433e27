#include "models/model_init.h"

#include <algorithm>
#include <cmath>

namespace st {

void kaiming_normal(Param& w, FanMode mode, Rng& rng) {
  const Shape& s = w.value.shape();
  ST_CHECK(s.rank() == 2 || s.rank() == 4, "kaiming_normal: ", w.name,
           " must be [out, in] or [out, in, k, k], got ", s);
  ST_CHECK(w.value.device().is_cpu(), "kaiming_normal: initialise ", w.name,
           " on the CPU, then move it");
  const int64_t receptive = s.rank() == 4 ? s[2] * s[3] : 1;
  const int64_t fan = (mode == FanMode::FanIn ? s[1] : s[0]) * receptive;
  const float stddev = std::sqrt(2.0f / static_cast<float>(fan));
  const uint64_t seed = rng.seed(), stream = rng.next_stream();
  float* p = w.value.f32();
  const int64_t n = w.value.numel();
  // Box-Muller on two words of one Philox block per element.
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const Philox4 r = philox_block(seed, stream, static_cast<uint64_t>(i) >> 1);
    const int k = static_cast<int>(i & 1) * 2;
    const float u1 = std::max(uint_to_unit(r.v[k]), 1e-7f);
    const float u2 = uint_to_unit(r.v[k + 1]);
    p[i] = stddev * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.28318530718f * u2);
  }
}

void kaiming_normal_weights(Layer& model, FanMode mode, bool linear, Rng& rng) {
  for (Param* p : collect_params(model)) {
    if (p->kind != ParamKind::Weight) continue;
    const int rank = p->value.rank();
    if (rank == 4 || (linear && rank == 2)) kaiming_normal(*p, mode, rng);
  }
}

}  // namespace st
