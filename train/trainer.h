// Image classification, the task behind `sparsetrain train` and `eval` for the CNNs
// (train/trainer.cpp): the dataset and loader, the input copies to the device, softmax
// cross-entropy, test accuracy after each epoch. The step, the exchange, checkpoints and
// resume are the one training loop's (train/training_loop.h), on one process or many.
#pragma once

#include <cstdint>
#include <string>

#include "train/config.h"

namespace st {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;  // percent
  int64_t examples = 0;
};

struct TrainResult {
  EvalResult last_eval;
  int64_t steps = 0;
  double seconds = 0;
  double mean_step_ms = 0;  // forward + backward + exchange + update, without the first 5
  int interrupted_by = 0;   // the stop signal (SIGINT, SIGTERM, SIGUSR1, SIGHUP), 0 = none
};

class Communicator;

// Runs training on `comm`'s ranks; throws st::Error with a one-line reason on bad input
// or a NaN loss. Under MPI the caller should abort the job on an exception (the other
// ranks would otherwise wait in their next collective).
TrainResult train(const TrainConfig& config, Communicator& comm);
// Same, with a communicator made from config.comm.
TrainResult train(const TrainConfig& config);

// Evaluates `checkpoint` on the test split of config.dataset (arch from the checkpoint
// unless config.arch is set explicitly).
EvalResult evaluate_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                               Communicator& comm);

}  // namespace st
