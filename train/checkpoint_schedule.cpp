#include "train/checkpoint_schedule.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iterator>

#include "comm/communicator.h"

namespace st {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_checkpoint_written{false};
int g_installed = 0;  // nesting depth of StopSignals, on the thread that trains

void on_stop_signal(int sig) {
  if (g_stop_signal.exchange(sig) == 0) return;
  // Only async-signal-safe calls here. A checkpoint being written is a temporary file
  // until its rename, so the previous checkpoint stays whole.
  static const char kKept[] =
      "sparsetrain: second stop signal: exiting now; a checkpoint being written is "
      "abandoned and the previous one kept\n";
  static const char kNone[] =
      "sparsetrain: second stop signal: exiting now, before this run wrote a checkpoint\n";
  const bool kept = g_checkpoint_written.load();
  [[maybe_unused]] const ssize_t n = kept ? write(STDERR_FILENO, kKept, sizeof kKept - 1)
                                          : write(STDERR_FILENO, kNone, sizeof kNone - 1);
  std::_Exit(128 + sig);
}

}  // namespace

StopSignals::StopSignals() {
  static_assert(std::size(kStopSignals) == kCount);
  outermost_ = g_installed++ == 0;
  if (!outermost_) return;
  g_stop_signal = 0;
  g_checkpoint_written = false;
  for (int i = 0; i < kCount; ++i) previous_[i] = std::signal(kStopSignals[i], on_stop_signal);
}

StopSignals::~StopSignals() {
  --g_installed;
  if (!outermost_) return;
  for (int i = 0; i < kCount; ++i) std::signal(kStopSignals[i], previous_[i]);
}

void StopSignals::note_checkpoint_written() {
  g_checkpoint_written = true;
}

int StopSignals::received() {
  return g_stop_signal.load();
}

const char* StopSignals::name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

CheckpointSchedule::CheckpointSchedule(const Plan& plan, Communicator& comm, Save save)
    : plan_(plan), comm_(comm), save_(std::move(save)) {}

CheckpointSchedule::~CheckpointSchedule() {
  try {
    queued_.wait();  // every rank queued the same polls, so this one completes
  } catch (...) {
  }
}

CheckpointSchedule::Requests CheckpointSchedule::poll() {
  const bool due =
      plan_.minutes > 0 && comm_.rank() == 0 && since_checkpoint_.seconds() >= 60.0 * plan_.minutes;
  float flags[2] = {StopSignals::received() != 0 ? 1.0f : 0.0f, due ? 1.0f : 0.0f};
  if (plan_.lagged && comm_.size() > 1) return poll_lagged(flags);
  if (comm_.size() > 1) {
    Tensor t = Tensor::from_vector({flags[0], flags[1]}, {2});
    comm_.allreduce(t, ReduceOp::Max);
    flags[0] = t.f32()[0];
    flags[1] = t.f32()[1];
  }
  return {flags[0] > 0, flags[1] > 0};
}

CheckpointSchedule::Requests CheckpointSchedule::poll_lagged(const float flags[2]) {
  Requests previous;
  if (queued_flags_.defined()) {
    queued_.wait();
    previous = {queued_flags_.f32()[0] > 0, queued_flags_.f32()[1] > 0};
  }
  queued_flags_ = Tensor::from_vector({flags[0], flags[1]}, {2});
  queued_ = comm_.allreduce_async(queued_flags_, ReduceOp::Max);
  return previous;
}

void CheckpointSchedule::on_step_end(const StepAt& at) {
  const int64_t steps = at.steps_done();
  const bool epoch_done = at.batch + 1 >= plan_.steps_per_epoch;
  const Requests req = poll();
  at_limit_ = steps >= plan_.last_step && !epoch_done;
  stop_after_epoch_ = req.stop && epoch_done;
  interrupted_ = req.stop && !epoch_done;
  const bool every = plan_.every > 0 && steps % plan_.every == 0;
  if (at_limit_ || interrupted_ || every || (req.checkpoint && !epoch_done))
    save({at.epoch, std::min((at.batch + 1) * plan_.accum_steps, plan_.micro_batches_per_epoch),
          steps});
}

void CheckpointSchedule::save(const TrainPosition& at) {
  since_checkpoint_.reset();
  save_(at);
  StopSignals::note_checkpoint_written();
}

}  // namespace st
