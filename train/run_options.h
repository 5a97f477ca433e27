// What the training flags mean for the optimiser and the reducer: the one place a
// TrainConfig becomes their options.
#pragma once

#include "comm/reducer.h"
#include "optim/make_optimizer.h"
#include "train/config.h"

namespace st {

// --optimizer with the flags that apply to it (the factory refuses the others).
OptimizerOptions optimizer_options(const TrainConfig& c);
// --bucket-cap-mb, --first-bucket-mb, and when buckets launch: during backward, or after
// it when --no-overlap or a local clip (`clips_before_exchange` with --clip) needs the
// whole local gradient first.
ReducerOptions reducer_options(const TrainConfig& c, bool clips_before_exchange);

}  // namespace st
