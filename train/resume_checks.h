// What a resume checks of a checkpoint before anything is restored, so that a refusal
// comes before any note and leaves the model as built: the flags' own rules
// (train/flags.cpp), the number of ranks a mid-epoch position was cut for, a sparsifier
// whose residuals the checkpoint holds, a position inside an epoch that a step count can
// reach, and something left to train.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "train/checkpoint.h"
#include "train/config.h"

namespace st {

// `saved`: the checkpoint's metadata; `now`: this run's; `at`: the checkpoint's position;
// `micro_batches_per_epoch`: this run's. Each refusal is one line naming c.resume.
void check_resume(const TrainConfig& c, const std::map<std::string, std::string>& saved,
                  const std::map<std::string, std::string>& now, const TrainPosition& at,
                  int64_t micro_batches_per_epoch);

}  // namespace st
