// What a run records of itself and how it writes its checkpoint: the metadata that
// config.json and every checkpoint carry, the message that points back to the last good
// checkpoint after a failure, and the write that refuses non-finite weights.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "layers/layer.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/exchange_setup.h"
#include "train/training_task.h"

namespace st {

// <out>/checkpoint.safetensors.
std::string checkpoint_path(const TrainConfig& c);
// The task's metadata (its flags' entries, from the flag table) and the run's: the world
// size, the reducer's `bucket_cap_mb` (which --plan auto may have chosen instead of the
// flag's) and the exchange's layout and plan.
std::map<std::string, std::string> run_metadata(const TrainConfig& c, const TrainingTask& task,
                                                int world_size, double bucket_cap_mb,
                                                const ExchangeSetup& exchange);
// Where to go back to after a failure at step `steps_now`: the checkpoint at `path` and
// its step (checkpoints are written only when finite), or that there is none yet.
std::string last_good_checkpoint(const std::string& path, int64_t steps_now);
// Writes the checkpoint of `model` and `optimizer` at `at` to `path` (rank 0 calls it),
// refusing weights that hold NaN or inf; at an epoch end (`at.batch` 0) a copy is kept
// beside it until the next epoch end: the state a resume on another number of ranks (or
// batch size) starts from, after mid-epoch checkpoints replaced this one.
void write_run_checkpoint(const std::string& path, Layer& model, const Optimizer* optimizer,
                          const TrainPosition& at, const std::map<std::string, std::string>& meta,
                          const std::vector<std::pair<std::string, Tensor>>& extra);

}  // namespace st
