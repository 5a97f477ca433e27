#include "train/training_loop.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "core/ops.h"
#include "core/timer.h"
#include "layers/flat_params.h"
#include "optim/clip.h"
#include "optim/make_optimizer.h"
#include "train/checkpoint_schedule.h"
#include "train/exchange_setup.h"
#include "train/forward_overlap.h"
#include "train/mixed_precision.h"
#include "train/model_broadcast.h"
#include "train/resume_checks.h"
#include "train/run_checkpoint.h"
#include "train/run_observers.h"
#include "train/run_options.h"
#include "train/run_progress.h"
#include "train/run_report.h"
#include "train/step_observer.h"
#include "train/step_timing.h"
#include "train/sync_bn.h"

namespace st {

namespace {

class TrainingLoop {
 public:
  TrainingLoop(const TrainConfig& c, TrainingTask& task, Communicator& comm);
  LoopResult run();

 private:
  void resume();
  void plan_steps();
  bool step(const StepAt& at);
  void zero_grads();
  void forward(const StepAt& at, int k, StepLoss& sum);
  void backward(int k, int group);
  double finish_exchange();
  void update();
  void log_step(const StepAt& at, StepReport& r);
  void write_step_row();
  void settle();
  void end_epoch(int64_t epoch, double epoch_s);
  TrainingTask::Evaluation evaluate(bool epoch_end);
  void checkpoint(const TrainPosition& at);
  void stop(int signal);
  LoopResult finish();
  // Where to go back to after a divergence at the current step.
  std::string go_back() const {
    return st::last_good_checkpoint(checkpoint_path(c_), at_.result.steps) +
           " (try a lower --lr or --clip)";
  }
  std::map<std::string, std::string> metadata() const {
    const double cap = reducer_ ? reducer_->options().bucket_cap_mb : c_.bucket_cap_mb;
    return run_metadata(c_, task_, comm_.size(), cap, *exchange_);
  }

  const TrainConfig& c_;
  TrainingTask& task_;
  Communicator& comm_;
  FlatParams flat_;
  MixedPrecision precision_;
  // The hook stack (--sparsifier, --hierarchy, --plan) and what it keeps: declared before
  // the reducer, whose exchanges read its side inputs until the reducer is gone.
  std::unique_ptr<ExchangeSetup> exchange_;
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<Optimizer> optimizer_;
  // When gradients are zeroed and the update runs (train/forward_overlap.h); after the
  // reducer and the optimiser, which its per-bucket updates use until it drains them.
  std::unique_ptr<UpdateTiming> update_;
  RunReport report_;
  RunObservers observers_;
  RunProgress at_;
};

TrainingLoop::TrainingLoop(const TrainConfig& c, TrainingTask& task, Communicator& comm)
    : c_(c),
      task_(task),
      comm_(comm),
      flat_(task.model(), task.device()),
      precision_(c, task.model(), comm.rank() == 0),
      optimizer_(make_optimizer(c.optimizer, flat_.params(), optimizer_options(c))),
      report_(c, task, comm),
      at_(c, task.steps_per_epoch()) {
  broadcast_model(task_.model(), flat_, comm_);
  exchange_ = std::make_unique<ExchangeSetup>(c_, comm_);
  exchange_->attach_side_inputs(flat_);
  ReducerOptions buckets = reducer_options(c_, task_.clips_before_exchange());
  buckets.bucket_cap_mb =
      exchange_->bucket_cap_mb(ready_numels(flat_), buckets, task_.device(), report_.quiet());
  reducer_ = std::make_unique<Reducer>(flat_, comm_, exchange_->hook(), buckets);
  update_ =
      std::make_unique<UpdateTiming>(c_, task_.clips_before_exchange(), precision_.scales_loss(),
                                     *reducer_, *optimizer_, comm_, report_.quiet());
  report_.setup(task_.model(), reducer_->describe_plan(), describe_placement(comm_));
  if (!c_.resume.empty()) {
    resume();
  } else {
    exchange_->make_plan(reducer_->buckets(), nullptr, task_.device(), report_.quiet());
    at_.start_at({});
  }
  nlohmann::json config = metadata();
  task_.add_config(config);
  report_.open(at_.start(), config);
  plan_steps();
}

// --resume: every check before anything is restored, then the model, optimiser, sums,
// task, precision and exchange state of the checkpoint.
void TrainingLoop::resume() {
  std::map<std::string, std::string> saved;
  const TrainPosition pos = load_checkpoint(
      c_.resume, task_.model(), optimizer_.get(), &saved,
      [&](const std::map<std::string, std::string>& meta, const TrainPosition& at) {
        check_resume(c_, meta, metadata(), at, task_.steps_per_epoch());
        exchange_->check_resume(meta, c_.resume);
      },
      c_.allow_unknown_tensors);
  if (pos.batch > 0) report_.sums().restore(saved, comm_, c_.resume);
  task_.restore(c_.resume, saved, pos);
  precision_.restore(saved, c_.resume);
  // Last, as it may print notes (a re-split, a plan probed again): a refusal of the
  // checks above comes alone.
  exchange_->resume(pos.step, *reducer_, saved, task_.device(), report_.quiet());
  report_.resumed(pos);
  at_.start_at(pos);
}

// After the resume: the observers of the run's steps.
void TrainingLoop::plan_steps() {
  observers_.add(
      c_, at_.checkpoint_plan(update_->exchange_outlives_step()), at_.start().step,
      [this](const TrainPosition& at) { checkpoint(at); }, task_.model(), *reducer_, comm_);
}

TrainingTask::Evaluation TrainingLoop::evaluate(bool epoch_end) {
  settle();
  broadcast_buffers(task_.model(), comm_);
  at_.result.evaluated = true;
  TrainingTask::Evaluation ev = task_.evaluate(epoch_end);
  // Every rank holds the same reduced figure, so every rank stops here together.
  ST_CHECK(std::isfinite(ev.loss), "evaluation at step ", at_.result.steps, " gave a loss of ",
           ev.loss,
           precision_.precision() == Precision::F32 ? "" : " (16-bit activations overflowed)",
           ": the model has diverged; stopping. ", go_back());
  return ev;
}

void TrainingLoop::checkpoint(const TrainPosition& at) {
  settle();
  broadcast_buffers(task_.model(), comm_);
  std::vector<std::pair<std::string, Tensor>> extra;
  std::map<std::string, std::string> meta = metadata();
  if (at.batch > 0) report_.sums().save(meta, comm_);
  task_.checkpoint_state(extra, meta);
  precision_.save(meta);
  exchange_->add_checkpoint_state(extra);
  if (report_.leader())
    write_run_checkpoint(checkpoint_path(c_), task_.model(), optimizer_.get(), at, meta, extra);
}

// One optimiser step: data, forward, backward with the exchange, optimiser, metrics.
// Observers time the phases, trace them and checkpoint after the step.
bool TrainingLoop::step(const StepAt& at) {
  const int group = at_.group_size(at.batch);
  if (group <= 0) return false;
  observers_.all.step_begin(at);
  StepReport r;
  r.lr = task_.lr(at.epoch, at.batch * c_.accum_steps);  // of the step's first micro-batch
  optimizer_->set_lr(r.lr);
  update_->begin_step([&] { zero_grads(); });
  for (int k = 0; k < group; ++k) {
    observers_.all.phase_begin(Phase::Data);
    if (!task_.load_batch()) return false;  // the epoch's data ended
    observers_.all.phase_end(Phase::Data);
    forward(at, k, r.loss);
    update_->after_forward(k, observers_.all, at_.result.steps - at_.start().step, [&] {
      write_step_row();
      zero_grads();
    });
    // The last micro-batch's buckets are exchanged while its backward goes on.
    observers_.all.timed(Phase::Backward, [&] { backward(k, group); });
  }
  r.grad_norm = finish_exchange();
  observers_.all.timed(
      Phase::Update, [&] { update_->end_step([&] { update(); }, observers_.timing->times().bwd); });
  ++at_.result.steps;
  log_step(at, r);
  observers_.all.step_end(at);
  return true;
}

void TrainingLoop::zero_grads() {
  flat_.zero_grads();
  exchange_->zero_side_inputs();
  precision_.keep_buffers();
}

// Forward of micro-batch `k`, its loss added to `sum`.
void TrainingLoop::forward(const StepAt& at, int k, StepLoss& sum) {
  const StepLoss m = observers_.all.timed(Phase::Forward, [&] { return task_.forward_loss(); });
  if (!std::isfinite(m.loss))
    ST_THROW("loss is ", m.loss, " at iteration ", at_.result.steps, " (epoch ", at.epoch, ", ",
             task_.step_name(), " ", at.batch * c_.accum_steps + k, "); stopping. ", go_back());
  sum.loss += m.loss * static_cast<float>(m.count);
  sum.count += m.count;
  sum.correct += m.correct;
}

// Backward of micro-batch `k` of `group`. Only the last one's backward exchanges (DDP's
// no_sync for the others), so overlap is kept and error feedback sees one exchange per
// optimiser step; its buckets launch as they fill.
void TrainingLoop::backward(int k, int group) {
  if (k + 1 == group) reducer_->begin_backward();
  Tensor dy = task_.loss_grad();
  // The step's gradient is the mean over its micro-batches; fp16 scales the loss.
  const float factor = precision_.loss_scale() / static_cast<float>(group);
  if (factor != 1.0f) scale_inplace(dy, factor);
  task_.model().backward(dy);
  task_.after_step();
}

// The local clip (the buckets are still waiting for it), then the exposed wait for the
// exchange: what backward did not hide. Returns the local clip's norm (0 without one).
double TrainingLoop::finish_exchange() {
  double norm = 0;
  if (task_.clips_before_exchange() && c_.clip > 0)
    norm =
        observers_.all.timed(Phase::Clip, [&] { return clip_grad_norm(flat_.params(), c_.clip); });
  observers_.all.timed(Phase::Exchange, [&] { reducer_->finalize(); });
  return norm;
}

// The step-end update; fp16: an overflowed step is skipped (the loss scaler lowers its
// scale and the buffers are put back).
void TrainingLoop::update() {
  if (!precision_.unscale_and_check(flat_.grads(), comm_)) return;
  if (!task_.clips_before_exchange() && c_.clip > 0) clip_grad_norm(flat_.params(), c_.clip);
  optimizer_->step();
}

void TrainingLoop::log_step(const StepAt& at, StepReport& r) {
  report_.step(at, at_.result.steps, at_.steps_per_epoch(), at_.total_steps(), r,
               *observers_.timing);
  // The sparsifier's statistics of this step are complete once its buckets are.
  if (!update_->exchange_outlives_step() || !exchange_->reports_statistics()) write_step_row();
}

// The last step's metrics row with the statistics that complete it.
void TrainingLoop::write_step_row() {
  report_.write_held_row([&](MetricRow& row) {
    exchange_->add_statistics(row);
    precision_.add_metrics(row);
  });
}

// Every bucket in flight is exchanged and applied, and the communication thread idle
// (the checkpoint schedule may queue its polls there): before evaluation, a checkpoint
// or the end, which read the parameters or the optimiser state and run collectives on
// this thread.
void TrainingLoop::settle() {
  reducer_->drain();
  comm_.wait_idle();
  write_step_row();
}

void TrainingLoop::end_epoch(int64_t epoch, double epoch_s) {
  at_.result.last_eval = evaluate(true);
  const float epoch_lr = task_.end_epoch(epoch, at_.result.last_eval);
  report_.epoch(epoch, at_.result.steps, epoch_s, at_.result.last_eval, epoch_lr);
  observers_.schedule->save({epoch + 1, 0, at_.result.steps});
}

void TrainingLoop::stop(int signal) {
  at_.result.interrupted_by = signal;
  report_.interrupted(signal, at_.result.steps, checkpoint_path(c_));
}

LoopResult TrainingLoop::finish() {
  settle();
  observers_.all.run_end();
  at_.result.seconds = report_.seconds();
  at_.result.mean_step_ms = observers_.timing->mean_step_ms();
  return at_.result;
}

LoopResult TrainingLoop::run() {
  StopSignals signals;
  LoopResult& result = at_.result;
  for (int64_t epoch = at_.start().epoch; epoch < c_.epochs; ++epoch) {
    // Checkpoint positions count the task's micro-batches.
    const int64_t first = epoch == at_.start().epoch ? at_.start().batch : 0;
    task_.start_epoch(epoch, first);
    Timer epoch_timer;
    report_.sums().begin_epoch(epoch == at_.start().epoch && first > 0);
    for (int64_t b = first / c_.accum_steps; step({epoch, b, result.steps}); ++b) {
      // The checkpoint schedule decided after the step.
      if (observers_.schedule->interrupted()) {
        stop(StopSignals::received());
        return finish();
      }
      if (observers_.schedule->at_limit()) {
        result.last_eval = evaluate(false);
        report_.stopped_at_limit(result.steps, result.last_eval.summary, checkpoint_path(c_));
        return finish();
      }
    }
    end_epoch(epoch, epoch_timer.seconds());
    if (observers_.schedule->stop_after_epoch()) {
      stop(StopSignals::received());
      break;
    }
    if (result.steps >= at_.total_steps()) break;
  }
  return finish();
}

}  // namespace

LoopResult run_training(const TrainConfig& c, TrainingTask& task, Communicator& comm) {
  const SyncBatchNorm sync_bn(task.model(), comm, c.sync_bn);
  TrainingLoop loop(c, task, comm);
  return loop.run();
}

}  // namespace st
