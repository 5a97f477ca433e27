// Trainer: the single-process training loop behind `sparsetrain train` and `eval`:
// data -> forward -> loss -> backward (gradients land in the flat buffer) -> clip ->
// SGD step, with per-iteration and per-epoch metrics, a progress line, test accuracy
// each epoch, atomic checkpoints and exact resume.
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
  int interrupted_by = 0;  // the stop signal (SIGINT, SIGTERM, SIGUSR1, SIGHUP), 0 = none
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
