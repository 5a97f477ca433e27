// Where a run stands and where it ends, in optimiser steps. An epoch of the task's
// micro-batches takes ceil(micro-batches / --accum-steps) steps, its last step taking
// the micro-batches left over. The run ends at --max-iters or at its last epoch's last
// step, counted from the resumed position, not as epochs x steps per epoch: a checkpoint
// of another number of ranks took another number of steps per epoch to get there.
#pragma once

#include <cstdint>

#include "train/checkpoint.h"
#include "train/checkpoint_schedule.h"
#include "train/config.h"
#include "train/training_task.h"

namespace st {

class RunProgress {
 public:
  RunProgress(const TrainConfig& c, int64_t micro_batches_per_epoch)
      : c_(c), micro_batches_(micro_batches_per_epoch) {}

  // The run starts at `resumed` (all zero for a fresh run).
  void start_at(const TrainPosition& resumed);
  const TrainPosition& start() const { return start_; }
  int64_t total_steps() const { return total_steps_; }
  int64_t steps_per_epoch() const { return (micro_batches_ + c_.accum_steps - 1) / c_.accum_steps; }
  // Micro-batches of optimiser step `b` of an epoch: --accum-steps, fewer in its last.
  int group_size(int64_t b) const;
  // When checkpoints are written and the run stops; `lagged`: buckets are still in
  // flight when a step ends (train/checkpoint_schedule.h).
  CheckpointSchedule::Plan checkpoint_plan(bool lagged) const;

  LoopResult result;  // what the run did so far; result.steps counts resumed steps too

 private:
  const TrainConfig& c_;
  int64_t micro_batches_;
  TrainPosition start_;
  int64_t total_steps_ = 0;
};

}  // namespace st
