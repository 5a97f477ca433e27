// Overlap with the next forward (ByteScheduler, SOSP'19; P3, MLSys'19): each bucket's
// share of the optimiser step runs on the communication thread right after the bucket's
// exchange, and the next forward waits, per layer, only for the buckets of that layer's
// parameters. The updates are the same as the step-end update's, bit for bit, only
// earlier. What decides whether a run can take this path, and the update per bucket.
#pragma once

#include <string>

#include "comm/reducer.h"
#include "optim/optimizer.h"
#include "train/config.h"

namespace st {

// Why a run that asked for --forward-overlap keeps the step-end update anyway (""
// when nothing stands in the way, or the flag was not passed): a rule that needs every
// bucket's result before any parameter may change.
//  - --no-overlap (the benchmarks' baseline: no bucket is exchanged during backward);
//  - --clip after the exchange (the global norm reads the whole averaged gradient);
//  - fp16 loss scaling (an overflowed step is skipped as a whole, decided over every bucket);
//  - --trace (its clock sync and gathers are collectives on the training thread, which
//    must not run while buckets are in flight).
std::string forward_overlap_blocker(const TrainConfig& c, bool clips_before_exchange,
                                    bool scales_loss);

// The reducer's bucket update: called as a bucket launches (training thread), it takes
// the optimiser's current learning rate, and returns the task that updates that bucket's
// parameters with it and finishes the device work (communication thread).
Reducer::BucketUpdate bucket_update(Optimizer& optimizer);

}  // namespace st
