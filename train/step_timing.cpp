#include "train/step_timing.h"

namespace st {

namespace {

// Steps of a run left out of its mean step time: allocator, caches and thread pools
// warm up over the first ones.
constexpr int64_t kWarmupSteps = 5;

}  // namespace

void StepTiming::on_step_begin(const StepAt&) {
  times_ = StepTimes{};
}

void StepTiming::on_phase_begin(Phase, Clock::time_point at) {
  phase_begin_ = at;
}

void StepTiming::on_phase_end(Phase phase, Clock::time_point at) {
  const double ms = std::chrono::duration<double, std::milli>(at - phase_begin_).count();
  switch (phase) {
    case Phase::Data:
      times_.data += ms;
      break;
    case Phase::Forward:
      times_.fwd += ms;
      break;
    case Phase::Backward:
      times_.bwd += ms;
      break;
    case Phase::Exchange:
      times_.comm += ms;
      break;
    case Phase::Clip:  // clipping counts as optimiser work
    case Phase::Update:
      times_.opt += ms;
      break;
  }
}

double StepTiming::seconds_per_step() const {
  const double seconds = (times_.data + times_.compute()) / 1e3;
  return steps_ == 0 ? seconds : 0.9 * smoothed_seconds_ + 0.1 * seconds;
}

void StepTiming::on_step_end(const StepAt&) {
  smoothed_seconds_ = seconds_per_step();
  ms_sum_ += times_.compute();
  if (steps_ >= kWarmupSteps) ms_sum_after_warmup_ += times_.compute();
  ++steps_;
}

double StepTiming::mean_step_ms() const {
  if (steps_ > kWarmupSteps)
    return ms_sum_after_warmup_ / static_cast<double>(steps_ - kWarmupSteps);
  return steps_ > 0 ? ms_sum_ / static_cast<double>(steps_) : 0.0;
}

}  // namespace st
