#include "train/loss_scaler.h"

#include <cmath>
#include <cstdio>

#include "comm/communicator.h"
#include "core/error.h"
#include "core/ops.h"
#include "train/checkpoint.h"

namespace st {

LossScaler::LossScaler(LossScalerOptions o) : o_(o), scale_(o.init_scale) {
  ST_CHECK(
      o_.init_scale > 0 && o_.growth > 1 && o_.backoff > 0 && o_.backoff < 1 && o_.interval > 0,
      "LossScaler: invalid options (scale ", o_.init_scale, ", growth ", o_.growth, ", backoff ",
      o_.backoff, ", interval ", o_.interval, ")");
}

bool LossScaler::unscale_and_check(Tensor& grads, Communicator& comm) {
  const float inv = static_cast<float>(1.0 / scale_);
  int64_t bad = 0;
  if (grads.device().is_cpu()) {
    float* g = grads.f32();
    const int64_t n = grads.numel();
    // inf * 0 is NaN, so the product of the whole buffer would hide nothing; count instead.
#pragma omp parallel for reduction(+ : bad)
    for (int64_t i = 0; i < n; ++i) {
      g[i] *= inv;
      bad += std::isfinite(g[i]) ? 0 : 1;
    }
  } else {
    // On a device: one scaling pass and one reduction (core/ops.h). The sum of squares is
    // accumulated in double, where no float squared overflows, so it is finite exactly
    // when every element is.
    scale_inplace(grads, inv);
    bad = std::isfinite(sum_squares(grads)) ? 0 : 1;
  }
  // The dense exchange already carries an inf to every rank; the allreduce makes the
  // decision collective whatever the exchange did.
  const bool finite = comm.allreduce_scalar(bad > 0 ? 1.0 : 0.0, ReduceOp::Max) == 0.0;
  update(finite);
  return finite;
}

void LossScaler::update(bool finite) {
  last_skipped_ = !finite;
  if (!finite) {
    scale_ *= o_.backoff;
    clean_steps_ = 0;
    ++skipped_;
    return;
  }
  if (++clean_steps_ == o_.interval) {
    scale_ *= o_.growth;
    clean_steps_ = 0;
  }
}

void LossScaler::save(std::map<std::string, std::string>& meta) const {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", scale_);
  meta["loss_scale"] = text;
  meta["loss_scale_clean_steps"] = std::to_string(clean_steps_);
  meta["loss_scale_skipped"] = std::to_string(skipped_);
}

void LossScaler::restore(const std::map<std::string, std::string>& meta, const std::string& path) {
  if (!meta.count("loss_scale")) return;
  const double s = meta_double(meta, "loss_scale", path);
  ST_CHECK(std::isfinite(s) && s > 0, path, ": checkpoint metadata 'loss_scale' is ", s,
           ", expected a positive finite number");
  scale_ = s;
  clean_steps_ = meta_int(meta, "loss_scale_clean_steps", path, 0, o_.interval - 1);
  skipped_ = meta_int(meta, "loss_scale_skipped", path, 0);
}

}  // namespace st
