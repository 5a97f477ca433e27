// Sufficient statistics of SIDCo's stage fits (Abdelmoniem et al., MLSys 2021;
// sparsify/sidco_fit.h): moments of a sample of magnitudes a = |x|. The bulk passes that
// produce them (bulk::Ops::exceed_moments, exceed_compact) and the fits that read them
// share this header; the per-element log term is ST_HD so the CPU and CUDA passes
// evaluate the same formula.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/host_device.h"

namespace st::sidco {

// SIDCo's reference code takes ln(a + eps) so that a = 0 stays finite.
constexpr double kLogEps = 2.2e-16;

// ln(|x| scale + eps): one term of the gamma fit's mean log (scale = 1 / ||x||_2).
ST_HD double log_term(float x, double scale) {
  return std::log(std::fabs(x) * scale + kLogEps);
}

struct Moments {
  int64_t count = 0;
  double sum = 0, sumsq = 0, sumlog = 0;
  double min = std::numeric_limits<double>::infinity();
  void add(const Moments& o);
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
  double var() const;  // unbiased (count - 1)
};

}  // namespace st::sidco
