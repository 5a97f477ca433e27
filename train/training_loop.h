// The one training loop. It owns what every kind of training shares: the exchange (the
// bucketed Reducer with the dense or sparsifying hook), the optimiser, steps, metrics,
// config.json, checkpoints and resume, the Chrome trace, the progress line, NaN handling
// and the stop conditions. A TrainingTask supplies what differs between kinds of work:
// how a step's input is produced, the loss, evaluation, carried state and its
// checkpointing, whether clipping happens before the exchange, and the LR policy.
//
// Per step: task.load_batch() -> task.forward_loss() -> backward with the reducer
// exchanging buckets as they become ready, task.after_step() -> [local clip] -> finalize
// (exposed communication) -> [global clip] -> optimiser step -> metrics. Phase timing,
// the trace and the checkpoint schedule watch the step as observers
// (train/step_observer.h).
#pragma once

#include "train/config.h"
#include "train/training_task.h"

namespace st {

class Communicator;

// Runs `task` under config `c` on `comm`'s ranks.
LoopResult run_training(const TrainConfig& c, TrainingTask& task, Communicator& comm);

}  // namespace st
