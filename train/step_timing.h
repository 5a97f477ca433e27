// Phase timing of the training steps: the metrics' data_ms, fwd_ms, bwd_ms, comm_ms and
// opt_ms of the step in progress, the smoothed step time behind the progress line's
// rate and ETA, and the run's mean step time (LoopResult::mean_step_ms).
#pragma once

#include <cstdint>

#include "train/step_observer.h"

namespace st {

// One step's timings (ms), each phase summed over its micro-batches.
struct StepTimes {
  double data = 0, fwd = 0, bwd = 0, comm = 0, opt = 0;
  // What the step costs beyond waiting for data.
  double compute() const { return fwd + bwd + comm + opt; }
};

class StepTiming : public StepObserver {
 public:
  void on_step_begin(const StepAt& at) override;
  void on_phase_begin(Phase phase, Clock::time_point at) override;
  void on_phase_end(Phase phase, Clock::time_point at) override;
  void on_step_end(const StepAt& at) override;

  // The step in progress (or the last one, between steps).
  const StepTimes& times() const { return times_; }
  // Exponential average of the whole step time in seconds (data included), the step in
  // progress counted: the progress line's rate and ETA.
  double seconds_per_step() const;
  // Mean compute() of this run's steps without its first 5 (warm-up), or of all of them
  // when the run took no more.
  double mean_step_ms() const;

 private:
  // Steps of this run that ended (the first seconds_per_step() starts the average).
  int64_t steps_ = 0;
  StepTimes times_;
  Clock::time_point phase_begin_;
  double smoothed_seconds_ = 0;
  double ms_sum_ = 0, ms_sum_after_warmup_ = 0;
};

}  // namespace st
