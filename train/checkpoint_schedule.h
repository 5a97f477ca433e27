// When a run writes mid-epoch checkpoints and when it stops, as a step observer: after
// every step it asks all ranks whether a stop signal arrived or --checkpoint-minutes
// elapsed (rank 0's clock), and checkpoints every --checkpoint-every steps, on those
// requests and at --max-iters. The loop reads the decision after the step.
#pragma once

#include <cstdint>
#include <functional>

#include "comm/comm_worker.h"
#include "core/tensor.h"
#include "core/timer.h"
#include "train/checkpoint.h"
#include "train/step_observer.h"

namespace st {

class Communicator;

// Graceful stop: the first SIGINT, SIGTERM, SIGUSR1 (SLURM's warning before a time
// limit, with --signal) or SIGHUP (a lost terminal) asks the loop to finish its step,
// write a checkpoint and return; a second one exits at once, saying so. The handlers are
// installed for the object's lifetime and the previous ones restored after. Objects nest:
// the CLI installs one as soon as it knows it will train (so a signal during start-up is
// kept for the loop's first poll, not the default action), the loop another; only the
// outermost installs and restores.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The first stop signal received while installed, 0 = none.
  static int received();
  static const char* name(int sig);
  // That a checkpoint of this run is on disk, so a second signal's message can say
  // the last one stays whole (and not name one that does not exist).
  static void note_checkpoint_written();

 private:
  static constexpr int kCount = 4;
  bool outermost_ = false;
  void (*previous_[kCount])(int);
};

class CheckpointSchedule : public StepObserver {
 public:
  struct Plan {
    int64_t every = 0;            // --checkpoint-every (0 = off)
    double minutes = 0;           // --checkpoint-minutes (0 = off)
    int64_t last_step = 0;        // the run's end: --max-iters or the last epoch's last step
    int64_t steps_per_epoch = 0;  // optimiser steps
    int64_t accum_steps = 1;      // micro-batches per optimiser step
    int64_t micro_batches_per_epoch = 0;  // what checkpoint positions count
    // Buckets may still be in flight after a step (overlap with the next forward), so a
    // blocking collective here would run beside the communication thread's (MPI is
    // THREAD_SERIALIZED): the poll is queued behind them, and a step acts on the answer
    // of the step before it (a stop signal or --checkpoint-minutes take one step more).
    bool lagged = false;
  };
  using Save = std::function<void(const TrainPosition&)>;
  CheckpointSchedule(const Plan& plan, Communicator& comm, Save save);
  ~CheckpointSchedule() override;
  CheckpointSchedule(const CheckpointSchedule&) = delete;
  CheckpointSchedule& operator=(const CheckpointSchedule&) = delete;

  void on_step_end(const StepAt& at) override;
  // Writes a checkpoint at `at` now (an epoch end) and restarts the minutes' clock.
  void save(const TrainPosition& at);

  // What the last step's end decided (each after its checkpoint was written): a stop
  // signal mid-epoch; --max-iters reached mid-epoch; a stop signal at the epoch's last
  // step (the epoch end evaluates and checkpoints first).
  bool interrupted() const { return interrupted_; }
  bool at_limit() const { return at_limit_; }
  bool stop_after_epoch() const { return stop_after_epoch_; }

 private:
  struct Requests {
    bool stop = false, checkpoint = false;
  };
  // Collective: a stop signal on any rank, or the minutes elapsed on rank 0.
  Requests poll();
  // Plan::lagged: queues this step's poll and returns the previous step's answer.
  Requests poll_lagged(const float flags[2]);

  const Plan plan_;
  Communicator& comm_;
  Save save_;
  Timer since_checkpoint_;
  bool interrupted_ = false, at_limit_ = false, stop_after_epoch_ = false;
  Tensor queued_flags_;  // Plan::lagged: the poll in flight and its handle
  Work queued_;
};

}  // namespace st
