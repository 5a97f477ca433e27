// Overlap with the next forward (ByteScheduler, SOSP'19; P3, MLSys'19): each bucket's
// share of the optimiser step runs on the communication thread right after the bucket's
// exchange, and the next forward waits, per layer, only for the buckets of that layer's
// parameters. The updates are the same as the step-end update's, bit for bit, only
// earlier. What decides whether a run can take this path, and the update per bucket.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/reducer.h"
#include "optim/optimizer.h"
#include "train/config.h"
#include "train/exchange_order_probe.h"
#include "train/step_observer.h"

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

// When a step's gradients are zeroed and its update runs: at the step's end, after every
// bucket (the default), or per bucket as each arrives, the next forward overlapping the
// rest (--forward-overlap, when nothing blocks it). The loop asks this object at each of
// those points and never tests the mode itself. With --first-layers-first -1 the first
// steps probe the exchange order and may turn the run back to the step-end update.
class UpdateTiming {
 public:
  // Announces a blocker (rank 0 unless `quiet`) and installs the per-bucket update and
  // the exchange order on `reducer`.
  UpdateTiming(const TrainConfig& c, bool clips_before_exchange, bool scales_loss, Reducer& reducer,
               Optimizer& optimizer, Communicator& comm, bool quiet);
  // Buckets still in flight (an exception unwinding) update through the optimiser: they
  // finish first.
  ~UpdateTiming();
  UpdateTiming(const UpdateTiming&) = delete;
  UpdateTiming& operator=(const UpdateTiming&) = delete;

  // Before the step's first forward: the step-end update zeroes the gradients now.
  void begin_step(const std::function<void()>& zero_grads) const;
  // After micro-batch `k`'s forward. Per bucket, after the first: the previous step's
  // buckets finish (timed as exposed exchange), `then` completes its row and zeroes the
  // gradients, and the probe takes that step (`steps_done`: this run's steps).
  void after_forward(int k, StepObservers& observers, int64_t steps_done,
                     const std::function<void()>& then);
  // At the step's end: `update` (the optimiser) runs unless the buckets updated
  // themselves. `backward_ms`: the step's backward, for the probe.
  void end_step(const std::function<void()>& update, double backward_ms);
  // Whether buckets are still in flight when a step ends (per bucket: until the next
  // step's first forward): the step's statistics complete only then, and a collective
  // on the training thread must not run beside them.
  bool exchange_outlives_step() const { return per_bucket_; }

 private:
  void probe_exchange_order(int64_t steps_done);
  void keep_step_end_update();

  Reducer& reducer_;
  Communicator& comm_;
  const bool quiet_;
  bool per_bucket_ = false;
  std::unique_ptr<ExchangeOrderProbe> order_probe_;  // --first-layers-first -1
  double last_backward_ms_ = 0;
};

}  // namespace st
