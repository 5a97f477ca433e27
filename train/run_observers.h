// The observers of a run's steps, told in this order after each step: the phase timing
// closes the step, the checkpoint schedule writes a checkpoint when one is due, the trace
// window closes. The loop asks the timing and the schedule after a step.
#pragma once

#include <cstdint>

#include "comm/reducer.h"
#include "layers/layer.h"
#include "train/checkpoint_schedule.h"
#include "train/config.h"
#include "train/step_observer.h"
#include "train/step_timing.h"

namespace st {

class Communicator;

struct RunObservers {
  StepObservers all;
  StepTiming* timing = nullptr;
  CheckpointSchedule* schedule = nullptr;

  // Adds them for a run from step `start` under `plan` (its last_step the run's end);
  // --trace covers steps [5, 5 + --trace-iters) of the run, or its last --trace-iters
  // steps when it is shorter than that.
  void add(const TrainConfig& c, const CheckpointSchedule::Plan& plan, int64_t start,
           CheckpointSchedule::Save save, Layer& model, Reducer& reducer, Communicator& comm);
};

}  // namespace st
