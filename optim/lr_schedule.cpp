#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "core/error.h"

namespace st {

LrSchedule LrSchedule::constant(float base_lr) {
  LrSchedule s;
  s.base_lr = base_lr;
  return s;
}

LrSchedule LrSchedule::multistep(float base_lr, std::vector<int64_t> milestones, float gamma) {
  LrSchedule s;
  s.base_lr = base_lr;
  s.decay = LrDecay::MultiStep;
  s.milestones = std::move(milestones);
  s.gamma = gamma;
  return s;
}

LrSchedule LrSchedule::cosine(float base_lr, int64_t total_epochs, bool per_iteration,
                              float min_lr) {
  LrSchedule s;
  s.base_lr = base_lr;
  s.decay = LrDecay::Cosine;
  s.total_epochs = total_epochs;
  s.per_iteration = per_iteration;
  s.min_lr = min_lr;
  return s;
}

LrSchedule LrSchedule::with_warmup(double epochs, float start_lr) const {
  LrSchedule s = *this;
  s.warmup_epochs = epochs;
  s.warmup_start_lr = start_lr;
  return s;
}

void LrSchedule::validate() const {
  ST_CHECK(base_lr >= 0.0f, "lr schedule: base lr must be >= 0, got ", base_lr);
  ST_CHECK(warmup_epochs >= 0.0, "lr schedule: warm-up epochs must be >= 0, got ", warmup_epochs);
  if (decay == LrDecay::MultiStep) {
    ST_CHECK(gamma > 0.0f, "lr schedule: multistep gamma must be > 0, got ", gamma);
    ST_CHECK(std::is_sorted(milestones.begin(), milestones.end()),
             "lr schedule: multistep milestones must be increasing");
  }
  if (decay == LrDecay::Cosine) {
    ST_CHECK(total_epochs > warmup_epochs, "lr schedule: cosine needs total epochs (", total_epochs,
             ") beyond the warm-up (", warmup_epochs, ")");
  }
}

int64_t LrSchedule::warmup_iterations(int64_t iters_per_epoch) const {
  return std::llround(warmup_epochs * static_cast<double>(iters_per_epoch));
}

double LrSchedule::warmup_lr(int64_t k, int64_t warmup_iters) const {
  const double start = warmup_start_lr >= 0.0f ? warmup_start_lr : base_lr / warmup_iters;
  if (warmup_iters == 1) return start;
  return start + (base_lr - start) * static_cast<double>(k) / static_cast<double>(warmup_iters - 1);
}

float LrSchedule::lr(int64_t epoch, int64_t iter, int64_t iters_per_epoch) const {
  ST_CHECK(iters_per_epoch > 0 && epoch >= 0 && iter >= 0 && iter < iters_per_epoch,
           "lr schedule: bad position epoch ", epoch, ", iteration ", iter, " of ",
           iters_per_epoch);
  const int64_t k = epoch * iters_per_epoch + iter;  // global iteration
  const int64_t warmup_iters = warmup_iterations(iters_per_epoch);
  if (k < warmup_iters) return static_cast<float>(warmup_lr(k, warmup_iters));
  switch (decay) {
    case LrDecay::Constant:
      return base_lr;
    case LrDecay::MultiStep: {
      const auto passed =
          std::upper_bound(milestones.begin(), milestones.end(), epoch) - milestones.begin();
      return static_cast<float>(base_lr * std::pow(static_cast<double>(gamma), passed));
    }
    case LrDecay::Cosine: {
      // Position in epochs since the end of the warm-up, over the epochs that remain.
      const double t =
          per_iteration ? static_cast<double>(k) / iters_per_epoch : static_cast<double>(epoch);
      const double span = static_cast<double>(total_epochs) - warmup_epochs;
      const double x = std::clamp((t - warmup_epochs) / span, 0.0, 1.0);
      return static_cast<float>(min_lr +
                                (base_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * x)));
    }
  }
  return base_lr;
}

namespace {

[[noreturn]] void bad_schedule(const std::string& spec, const std::string& why) {
  ST_THROW("--schedule '", spec, "': ", why,
           "; valid: constant, cosine, multistep, multistep:E1,E2,...[:gamma]");
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.emplace_back();
  return parts;
}

}  // namespace

LrSchedule parse_lr_schedule(const std::string& spec, float base_lr, int64_t epochs,
                             double warmup_epochs) {
  const std::vector<std::string> parts = split(spec, ':');
  const std::string kind = parts.empty() ? "" : parts[0];
  LrSchedule s;
  if (kind == "constant" && parts.size() == 1) {
    s = LrSchedule::constant(base_lr);
  } else if (kind == "cosine" && parts.size() == 1) {
    s = LrSchedule::cosine(base_lr, epochs);
  } else if (kind == "multistep" && parts.size() == 1) {
    // Skip milestones that would fall on epoch 0 or repeat in very short runs.
    std::vector<int64_t> milestones;
    for (int64_t m : {epochs / 2, epochs * 3 / 4})
      if (m > 0 && (milestones.empty() || m > milestones.back())) milestones.push_back(m);
    s = LrSchedule::multistep(base_lr, std::move(milestones));
  } else if (kind == "multistep" && parts.size() <= 3) {
    std::vector<int64_t> milestones;
    float gamma = 0.1f;
    try {
      for (const std::string& m : split(parts[1], ',')) {
        size_t used = 0;
        milestones.push_back(std::stoll(m, &used));
        if (used != m.size()) bad_schedule(spec, "milestone '" + m + "' is not an integer");
      }
      if (parts.size() == 3) {
        size_t used = 0;
        gamma = std::stof(parts[2], &used);
        if (used != parts[2].size()) bad_schedule(spec, "gamma is not a number");
      }
    } catch (const std::logic_error&) {  // std::invalid_argument, std::out_of_range
      bad_schedule(spec, "milestones and gamma must be numbers");
    }
    s = LrSchedule::multistep(base_lr, std::move(milestones), gamma);
  } else {
    bad_schedule(spec, "unknown schedule");
  }
  s = s.with_warmup(warmup_epochs);
  try {
    s.validate();
  } catch (const Error& e) {
    bad_schedule(spec, e.what());
  }
  return s;
}

}  // namespace st
