// Learning-rate schedules as pure functions of where training is (epoch, iteration in
// the epoch, iterations per epoch), so a resumed run recomputes the same rate with no
// scheduler state to save:
//   multistep  lr = base * gamma^(milestones passed)       (He et al. 2016, sec. 3.4 and 4.2)
//   cosine     lr = min + (base-min) * (1 + cos(pi t/T)) / 2   (Loshchilov & Hutter 2017, eq. 5)
//   warm-up    linear ramp to base over the first epochs  (Goyal et al. 2017, sec. 2.2)
// A warm-up composes with any of them: it replaces the first epochs, then the decay runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace st {

enum class LrDecay { Constant, MultiStep, Cosine };

struct LrSchedule {
  float base_lr = 0.1f;
  LrDecay decay = LrDecay::Constant;
  // MultiStep: lr *= gamma at the start of each milestone epoch (torch MultiStepLR).
  std::vector<int64_t> milestones;
  float gamma = 0.1f;
  // Cosine: from base_lr down to min_lr at total_epochs; after a warm-up the cosine spans
  // the remaining epochs. per_iteration=false steps once per epoch (torch
  // CosineAnnealingLR(T_max=epochs)); true anneals smoothly every iteration.
  int64_t total_epochs = 0;
  float min_lr = 0.0f;
  bool per_iteration = true;
  // Warm-up over the first warmup_epochs (fractional allowed) = W iterations: iteration
  // k < W gets start + (base - start) * k / (W - 1), reaching base at the last warm-up
  // iteration. A negative start means base/W, i.e. lr * (k + 1) / W as in the NVIDIA/apex
  // ImageNet example.
  double warmup_epochs = 0.0;
  float warmup_start_lr = -1.0f;

  static LrSchedule constant(float base_lr);
  static LrSchedule multistep(float base_lr, std::vector<int64_t> milestones, float gamma = 0.1f);
  static LrSchedule cosine(float base_lr, int64_t total_epochs, bool per_iteration = true,
                           float min_lr = 0.0f);
  // This schedule with a linear warm-up in front (start < 0: base/W, see above).
  LrSchedule with_warmup(double epochs, float start_lr = -1.0f) const;

  // The rate for iteration `iter` (0-based) of epoch `epoch` (0-based).
  float lr(int64_t epoch, int64_t iter, int64_t iters_per_epoch) const;
  // The warm-up's length in iterations: warmup_epochs of iters_per_epoch, rounded to the
  // nearest iteration (so a fractional epoch works).
  int64_t warmup_iterations(int64_t iters_per_epoch) const;
  // The rate at global iteration k < warmup_iters of the ramp described above.
  double warmup_lr(int64_t k, int64_t warmup_iters) const;
  // Throws st::Error naming the bad field.
  void validate() const;
};

// Builds a schedule from a --schedule flag value:
//   "constant" | "cosine" | "multistep" (milestones at 50% and 75% of the epochs, as He et
//   al.'s CIFAR runs) | "multistep:E1,E2,...[:gamma]"; warm-up from --warmup-epochs.
LrSchedule parse_lr_schedule(const std::string& spec, float base_lr, int64_t epochs,
                             double warmup_epochs = 0.0);

}  // namespace st
