// Checks of a training configuration before any work starts: every flag's range (one
// line naming the flag and the value; the ranges are the flag table's, train/flags.h,
// plus the checks across flags here), and, under mpirun, that every rank was started
// with the same flags (ranks that disagree would otherwise hang in a collective).
#pragma once

#include "train/config.h"
#include "train/flags.h"

namespace st {

class Communicator;

// PyTorch's weight decay defaults for --optimizer adam (0) and adamw (kAdamwWeightDecay)
// when --wd was not given; SGD keeps the project's default.
void apply_optimizer_defaults(TrainConfig& c, const FlagGiven& given);

// Throws st::Error naming the first flag whose value is out of range.
void check_config(const TrainConfig& c);

// Collective: throws on every rank whose configuration differs from rank 0's, naming the
// first differing flag of the table's rank-agreement column (agreed_flags, train/flags.h).
void check_same_config_on_all_ranks(const TrainConfig& c, Communicator& comm);

}  // namespace st
