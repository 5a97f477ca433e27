#include "train/training_loop.h"

#include "core/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "core/ops.h"
#include "core/timer.h"
#include "layers/batchnorm2d.h"
#include "layers/flat_params.h"
#include "optim/clip.h"
#include "optim/make_optimizer.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "sparsify/sq_gradients.h"
#include "train/checkpoint_schedule.h"
#include "train/config_check.h"
#include "train/epoch_sums.h"
#include "train/exchange_order_probe.h"
#include "train/exchange_setup.h"
#include "train/forward_overlap.h"
#include "train/mixed_precision.h"
#include "train/sparsify_checkpoint.h"
#include "train/step_observer.h"
#include "train/step_timing.h"
#include "train/trace_observer.h"
#include "train/train_common.h"

namespace st {

double perplexity(double loss) {
  return std::exp(std::min(loss, 700.0));
}

namespace {

namespace fs = std::filesystem;

// Variance-based compression needs per-sample squared-gradient sums for every weight
// matrix; vectors (biases, BatchNorm scales) may use VGC's documented g^2 / B bound.
// A model whose matrices lack them (the LSTM, the embedding) is refused here, at start,
// rather than silently trained on the bound.
void check_sq_grad_support(FlatParams& flat, const std::string& sparsifier) {
  for (Param* p : flat.params())
    ST_CHECK(p->provides_sq_grad || p->value.rank() < 2, "--sparsifier ", sparsifier,
             " needs per-sample squared gradients, which parameter '", p->name, "' ",
             p->value.shape().str(), " does not provide (only Linear and Conv2d layers do)");
}

// The per-sample squared-gradient sums the run's sparsifier reads as the hook's side
// input, when it reads them (null otherwise): the one place the loop asks.
std::unique_ptr<SqGradients> attach_sq_gradients(const TrainConfig& c, FlatParams& flat,
                                                 SparsifyHook* sparsify) {
  if (!sparsify || !sparsifier_uses_sq_grads(c.sparsifier)) return nullptr;
  check_sq_grad_support(flat, c.sparsifier);
  auto sq = std::make_unique<SqGradients>(flat, c.batch_size * c.accum_steps);
  sparsify->set_aux_provider(sq->provider());
  return sq;
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

const std::string* meta_find(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

// What a checkpoint must share with the run that resumes it: the flags' own rules
// (train/flags.cpp), the number of ranks a mid-epoch position was cut for, and a
// sparsifier whose residuals the checkpoint holds. Checkpoints of older versions lack some
// keys; those checks are skipped.
void check_resume_compatible(const TrainConfig& c, const std::map<std::string, std::string>& saved,
                             const std::map<std::string, std::string>& now,
                             const TrainPosition& pos) {
  const std::string epoch_end = epoch_end_path(c.resume);
  const std::string hint = fs::exists(epoch_end) && epoch_end != c.resume
                               ? " (resume the last epoch end, " + epoch_end + ", instead)"
                               : std::string(" (a checkpoint at an epoch end can)");
  const std::string *a = meta_find(saved, "world_size"), *b = meta_find(now, "world_size");
  ST_CHECK(!a || !b || *a == *b || pos.batch == 0, c.resume,
           ": a mid-epoch checkpoint with world_size ", *a,
           " resumes only with the same world_size, not ", *b, hint);
  check_resumed_flags(c.resume, saved, now, pos, hint);
  const std::string* method = meta_find(saved, "sparsifier");
  ST_CHECK(!method || *method == "none" || c.sparsifier != "none", c.resume,
           ": the checkpoint holds the error-feedback state of --sparsifier ", *method,
           "; resuming it dense would drop those residuals. Pass --sparsifier ", *method);
}

// --optimizer with the flags that apply to it (the factory refuses the others).
OptimizerOptions optimizer_options(const TrainConfig& c) {
  OptimizerOptions o;
  o.lr = c.lr;
  o.weight_decay = c.weight_decay;
  o.no_decay_on_norm_and_bias = c.no_wd_on_bn;
  if (c.optimizer == "sgd") {
    o.momentum = c.momentum;
    o.nesterov = c.nesterov;
  } else {
    o.betas = std::make_pair(c.beta1, c.beta2);
    o.eps = c.eps;
  }
  return o;
}

ReducerOptions reducer_options(const TrainConfig& c, const TrainingTask& task) {
  ReducerOptions ro;
  ro.bucket_cap_mb = c.bucket_cap_mb;
  ro.first_bucket_mb = c.first_bucket_mb;
  // Local clipping needs the whole local gradient, so the buckets then launch after
  // backward (after the clip) instead of during it.
  ro.defer_until_finalize = !c.overlap || (task.clips_before_exchange() && c.clip > 0);
  return ro;
}

// What a step's metrics row reports besides its phase times.
struct StepReport {
  StepLoss loss;  // summed over the micro-batches until log_step takes the mean per item
  float lr = 0;
  double grad_norm = 0;  // of the local clip, when the task clips before the exchange
};

class TrainingLoop {
 public:
  TrainingLoop(const TrainConfig& c, TrainingTask& task, Communicator& comm);
  ~TrainingLoop() {
    // Buckets still in flight (an exception unwinding) update through the optimiser,
    // which goes before the reducer: they finish first.
    if (forward_overlap_) {
      try {
        reducer_->drain();
      } catch (...) {
      }
    }
    if (c_.sync_bn) install_sync_bn(false);
  }
  LoopResult run();

 private:
  // After the resume: the run's last step and the observers of its steps.
  void plan_steps();
  void resume();
  // The checkpoint's position lies inside an epoch and leaves the step counter room.
  void check_resume_position(const TrainPosition& at) const;
  // After the compatibility checks: the position leaves something to train within
  // --epochs and --max-iters (a resume that would only rewrite the checkpoint is refused).
  void check_something_left(const TrainPosition& at) const;
  // --sync-bn: every BatchNorm sums its batch statistics over the ranks (on the
  // communication thread, in order with the bucket exchanges backward overlaps).
  void install_sync_bn(bool on);
  void open_logs();
  // Runs optimiser step `at` (--accum-steps micro-batches); false at the end of the epoch.
  bool step(const StepAt& at);
  // The parts of a step, in order.
  float set_lr(const StepAt& at);
  void zero_grads();
  // With forward overlap: the previous step's buckets finish before this backward
  // writes gradients; the wait not hidden by the forward counts as exposed exchange.
  void finish_previous_step();
  // Every bucket in flight is exchanged and applied, and the communication thread idle:
  // before evaluation, a checkpoint or the end, which read the parameters or the
  // optimiser state and run collectives on this thread.
  void settle();
  // --first-layers-first -1: the probe's step (train/exchange_order_probe.h).
  void probe_exchange_order();
  // After the probe: back to the step-end update when nothing is held back.
  void keep_step_end_update();
  // The last step's metrics row, held until its buckets' statistics are complete (with
  // forward overlap and a sparsifier, until the next step's drain or settle()).
  void write_step_row();
  bool load_data();
  void forward(const StepAt& at, int k, StepLoss& sum);
  void backward(int k, int group);
  double finish_exchange();
  void update();
  void log_step(const StepAt& at, StepReport& r);
  void print_progress(const StepAt& at, const StepReport& r) const;
  // Optimiser steps per epoch: the task's micro-batches / --accum-steps, rounded up (the
  // epoch's last step takes the micro-batches left over).
  int64_t steps_per_epoch() const {
    return (task_.steps_per_epoch() + c_.accum_steps - 1) / c_.accum_steps;
  }
  // Micro-batches of optimiser step `b`: --accum-steps, fewer in an epoch's last step.
  int group_size(int64_t b) const {
    return static_cast<int>(
        std::min<int64_t>(c_.accum_steps, task_.steps_per_epoch() - b * c_.accum_steps));
  }
  void end_epoch(int64_t epoch, double epoch_s);
  void checkpoint(const TrainPosition& at);
  // Where to go back to after a failure at the current step: the checkpoint and its
  // step (checkpoints are written only when finite), or that there is none yet.
  std::string last_good_checkpoint() const;
  std::map<std::string, std::string> metadata() const;
  // Rank 0's BatchNorm running statistics (buffers) become every rank's, so the sharded
  // evaluation and the saved model agree (PyTorch DDP's default broadcast_buffers).
  void sync_buffers();
  // fp16: a skipped (overflowed) step leaves no trace, so the BatchNorm running
  // statistics its forwards updated are put back as they were before the step.
  void save_buffers();
  void restore_buffers();
  TrainingTask::Evaluation evaluate(bool epoch_end);
  void report_interrupt();
  void stop_at_limit();
  LoopResult finish();

  const TrainConfig& c_;
  TrainingTask& task_;
  Communicator& comm_;
  const bool leader_;
  const bool quiet_;
  const bool tty_;
  FlatParams flat_;
  MixedPrecision precision_;
  // The hook stack (--sparsifier, --hierarchy, --plan); sparsify_ is its sparsifier's hook.
  std::unique_ptr<ExchangeSetup> exchange_;
  SparsifyHook* sparsify_ = nullptr;
  // Declared before the reducer, whose exchanges read it until the reducer is gone.
  std::unique_ptr<SqGradients> sq_grads_;
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<Optimizer> optimizer_;
  std::string ckpt_path_;
  TrainPosition pos_;
  MetricsWriter iter_log_, epoch_log_;
  LoopResult result_;
  Timer wall_;
  int64_t total_steps_ = 0;
  EpochSums sums_;
  std::vector<Tensor> saved_buffers_;  // fp16: the buffers before the current step
  // Each bucket updated as it arrives, the next forward overlapping the rest
  // (train/forward_overlap.h); false: the step waits for every bucket, then updates.
  bool forward_overlap_ = false;
  std::optional<MetricRow> pending_row_;
  // --first-layers-first -1: measures the first steps, then sets the exchange order.
  std::unique_ptr<ExchangeOrderProbe> order_probe_;
  double last_backward_ms_ = 0;
  StepObservers observers_;
  StepTiming* timing_ = nullptr;
  CheckpointSchedule* schedule_ = nullptr;
};

TrainingLoop::TrainingLoop(const TrainConfig& c, TrainingTask& task, Communicator& comm)
    : c_(c),
      task_(task),
      comm_(comm),
      leader_(comm.rank() == 0),
      quiet_(c.quiet || comm.rank() != 0),
      tty_(isatty(STDERR_FILENO)),
      flat_(task.model(), task.device()),
      precision_(c, task.model(), leader_),
      optimizer_(make_optimizer(c.optimizer, flat_.params(), optimizer_options(c))) {
  broadcast_model(task_.model(), flat_, comm_);
  exchange_ = std::make_unique<ExchangeSetup>(c_, comm_);
  sparsify_ = exchange_->sparsify();
  sq_grads_ = attach_sq_gradients(c_, flat_, sparsify_);
  ReducerOptions buckets = reducer_options(c_, task_);
  buckets.bucket_cap_mb =
      exchange_->bucket_cap_mb(ready_numels(flat_), buckets, task_.device(), quiet_);
  reducer_ = std::make_unique<Reducer>(flat_, comm_, exchange_->hook(), buckets);
  const std::string blocker =
      forward_overlap_blocker(c_, task_.clips_before_exchange(), precision_.scales_loss());
  forward_overlap_ = c_.forward_overlap && blocker.empty();
  if (forward_overlap_) {
    reducer_->set_bucket_update(bucket_update(*optimizer_));
    if (c_.first_layers_first >= 0)
      reducer_->set_first_layers_first(c_.first_layers_first);
    else
      order_probe_ = std::make_unique<ExchangeOrderProbe>();
  }
  if (!blocker.empty() && !quiet_)
    std::fprintf(stderr, "--forward-overlap ignored: %s\n", blocker.c_str());
  if (c_.sync_bn) install_sync_bn(true);
  if (c_.print_buckets && leader_) std::fputs(reducer_->describe_plan().c_str(), stderr);
  if (c_.print_placement)
    std::fprintf(stderr, "%s, device %s\n", describe_placement(comm_).c_str(),
                 task_.device().str().c_str());
  if (leader_) fs::create_directories(c_.out);
  ckpt_path_ = (fs::path(c_.out) / "checkpoint.safetensors").string();
  if (!c_.resume.empty())
    resume();
  else
    exchange_->make_plan(reducer_->buckets(), nullptr, task_.device(), quiet_);
  open_logs();
  plan_steps();
}

void TrainingLoop::plan_steps() {
  const int64_t start = result_.steps = pos_.step;
  // Counted from the resumed position, not as epochs x steps per epoch: a checkpoint of
  // another number of ranks took another number of steps per epoch to get here.
  const int64_t left = (c_.epochs - pos_.epoch) * steps_per_epoch() - pos_.batch / c_.accum_steps;
  total_steps_ = std::min<int64_t>(c_.max_iters > 0 ? c_.max_iters : INT64_MAX, start + left);
  // Told in this order after each step: timing closes it, a checkpoint is written, the
  // trace window closes.
  timing_ = &observers_.add(std::make_unique<StepTiming>());
  const CheckpointSchedule::Plan plan{
      c_.checkpoint_every, c_.checkpoint_minutes,   total_steps_,    steps_per_epoch(),
      c_.accum_steps,      task_.steps_per_epoch(), forward_overlap_};
  schedule_ = &observers_.add(std::make_unique<CheckpointSchedule>(
      plan, comm_, [this](const TrainPosition& at) { checkpoint(at); }));
  if (c_.trace.empty()) return;
  // Trace steps [5, 5 + trace_iters) of this run, or its last trace_iters steps when the
  // run is shorter than that.
  const int64_t first = std::min(start + 5, std::max(start, total_steps_ - c_.trace_iters));
  observers_.add(
      std::make_unique<TraceObserver>(TraceObserver::Window{c_.trace, first, c_.trace_iters, start},
                                      task_.model(), *reducer_, comm_));
}

void TrainingLoop::install_sync_bn(bool on) {
  int layers = 0;
  task_.model().visit_layers([&](Layer& layer) {
    auto* bn = dynamic_cast<BatchNorm2d*>(&layer);
    if (!bn) return;
    ++layers;
    if (on)
      bn->set_stat_sync([this](Tensor& t) { comm_.allreduce_async(t).wait(); });
    else
      bn->set_stat_sync(nullptr);
  });
  ST_CHECK(layers > 0, "--sync-bn: the model has no BatchNorm layers");
}

void TrainingLoop::check_resume_position(const TrainPosition& at) const {
  constexpr int64_t kMaxStep = int64_t{1} << 53;  // steps are also written as doubles
  const std::string& path = c_.resume;
  ST_CHECK(at.step <= kMaxStep, path, ": checkpoint metadata 'step' is ", at.step,
           ", more than the 2^53 steps a run counts");
  ST_CHECK(at.batch <= task_.steps_per_epoch(), path, ": checkpoint metadata 'batch' is ", at.batch,
           ", past the end of an epoch (", task_.steps_per_epoch(), ")");
  // Every finished epoch took a step at least, and this one ceil(batch / accum) steps:
  // a smaller step count would misplace the metrics cut-back and the schedule.
  const int64_t at_least = at.epoch + (at.batch + c_.accum_steps - 1) / c_.accum_steps;
  ST_CHECK(at.step >= at_least, path, ": checkpoint metadata 'step' is ", at.step,
           ", fewer than its position allows (epoch ", at.epoch, ", batch ", at.batch,
           ": at least ", at_least, ")");
}

void TrainingLoop::check_something_left(const TrainPosition& at) const {
  const std::string& path = c_.resume;
  ST_CHECK(at.epoch < c_.epochs, path, " has completed ", at.epoch, " epoch(s): --epochs ",
           c_.epochs, " leaves nothing to train (pass a larger --epochs)");
  ST_CHECK(c_.max_iters == 0 || c_.max_iters > at.step, path, " is at step ", at.step,
           ": --max-iters ", c_.max_iters, " leaves nothing to train (pass a larger --max-iters)");
}

void TrainingLoop::resume() {
  std::map<std::string, std::string> saved;
  pos_ = load_checkpoint(
      c_.resume, task_.model(), optimizer_.get(), &saved,
      [&](const std::map<std::string, std::string>& meta, const TrainPosition& at) {
        check_resume_compatible(c_, meta, metadata(), at);
        exchange_->check_resume(meta, c_.resume);
        check_resume_position(at);
        check_something_left(at);
      },
      c_.allow_unknown_tensors);
  if (pos_.batch > 0) sums_.restore(saved, comm_, c_.resume);
  task_.restore(c_.resume, saved, pos_);
  precision_.restore(saved, c_.resume);
  // Last, as it may print a note (a re-split): a refusal of the checks above comes alone.
  resume_exchange(c_, pos_.step, *reducer_, exchange_->sparsified(reducer_->buckets()), sparsify_,
                  comm_);
  exchange_->make_plan(reducer_->buckets(), &saved, task_.device(), quiet_);
  if (!c_.quiet && leader_)
    std::fprintf(stderr, "resumed from %s at epoch %ld %s %ld (step %ld)\n", c_.resume.c_str(),
                 static_cast<long>(pos_.epoch), task_.step_name(), static_cast<long>(pos_.batch),
                 static_cast<long>(pos_.step));
}

// Only rank 0 writes logs, the configuration and checkpoints.
void TrainingLoop::open_logs() {
  if (!leader_) return;
  const MetricsFormat fmt = parse_metrics_format(c_.metrics_format);
  const std::string ext = fmt == MetricsFormat::Csv ? ".csv" : ".jsonl";
  const bool append = !c_.resume.empty();
  const fs::path iter_path = fs::path(c_.out) / ("iterations" + ext);
  const fs::path epoch_path = fs::path(c_.out) / ("epochs" + ext);
  if (append) {
    // Rows written after the checkpoint will be written again.
    truncate_metrics(iter_path.string(), fmt, "step", pos_.step + 1);
    truncate_metrics(epoch_path.string(), fmt, "epoch", pos_.epoch);
    note_metrics_in_other_format(c_.out, fmt);
  }
  iter_log_ = MetricsWriter(iter_path.string(), fmt, append);
  epoch_log_ = MetricsWriter(epoch_path.string(), fmt, append);
  nlohmann::json cfg = metadata();
  task_.add_config(cfg);
  if (std::FILE* f = std::fopen((fs::path(c_.out) / "config.json").c_str(), "w")) {
    std::fputs(cfg.dump(2).c_str(), f);
    std::fclose(f);
  }
  const std::string line = task_.startup_line();
  if (!c_.quiet && !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
}

// Every rank joins the state gathers; rank 0 writes.
std::map<std::string, std::string> TrainingLoop::metadata() const {
  std::map<std::string, std::string> meta = task_.metadata();
  meta["world_size"] = std::to_string(comm_.size());
  meta["batch_size"] = std::to_string(c_.batch_size);
  meta["accum_steps"] = std::to_string(c_.accum_steps);
  meta["optimizer"] = c_.optimizer;
  meta["precision"] = c_.precision;
  meta["comm_dtype"] = c_.comm_dtype;
  // --plan auto may have chosen another cap than the flag's.
  meta["bucket_cap_mb"] =
      format_number(reducer_ ? reducer_->options().bucket_cap_mb : c_.bucket_cap_mb);
  meta["first_bucket_mb"] = format_number(c_.first_bucket_mb);
  exchange_->add_metadata(meta);
  return meta;
}

void TrainingLoop::sync_buffers() {
  if (comm_.size() == 1) return;
  for (Buffer* b : collect_buffers(task_.model())) comm_.broadcast(b->value, 0);
}

void TrainingLoop::save_buffers() {
  const std::vector<Buffer*> buffers = collect_buffers(task_.model());
  if (saved_buffers_.size() != buffers.size()) {
    saved_buffers_.clear();
    for (Buffer* b : buffers) saved_buffers_.push_back(b->value.clone());
    return;
  }
  for (size_t i = 0; i < buffers.size(); ++i) saved_buffers_[i].copy_from(buffers[i]->value);
}

void TrainingLoop::restore_buffers() {
  const std::vector<Buffer*> buffers = collect_buffers(task_.model());
  for (size_t i = 0; i < buffers.size() && i < saved_buffers_.size(); ++i)
    buffers[i]->value.copy_from(saved_buffers_[i]);
}

std::string TrainingLoop::last_good_checkpoint() const {
  if (!fs::exists(ckpt_path_)) return "No checkpoint was written yet";
  std::string step = "?";
  try {
    step = load_safetensors_metadata(ckpt_path_).at("step");
  } catch (const std::exception&) {
  }
  // A checkpoint of this very step holds the weights that just failed (an evaluation
  // that overflowed in 16 bits, say): not a good one to go back to.
  if (step == std::to_string(result_.steps))
    return "The last checkpoint, " + ckpt_path_ + ", holds these same weights (step " + step + ")";
  return "The last good checkpoint is " + ckpt_path_ + " (step " + step + ")";
}

TrainingTask::Evaluation TrainingLoop::evaluate(bool epoch_end) {
  settle();
  sync_buffers();
  result_.evaluated = true;
  TrainingTask::Evaluation ev = task_.evaluate(epoch_end);
  // Every rank holds the same reduced figure, so every rank stops here together.
  ST_CHECK(std::isfinite(ev.loss), "evaluation at step ", result_.steps, " gave a loss of ",
           ev.loss,
           precision_.precision() == Precision::F32 ? "" : " (16-bit activations overflowed)",
           ": the model has diverged; stopping. ", last_good_checkpoint(),
           " (try a lower --lr or --clip)");
  return ev;
}

void TrainingLoop::checkpoint(const TrainPosition& at) {
  settle();
  sync_buffers();
  std::vector<std::pair<std::string, Tensor>> extra;
  std::map<std::string, std::string> meta = metadata();
  if (at.batch > 0) sums_.save(meta, comm_);
  task_.checkpoint_state(extra, meta);
  precision_.save(meta);
  if (sparsify_)
    for (auto& entry : gather_sparsify_state(*sparsify_, comm_)) extra.push_back(std::move(entry));
  if (!leader_) return;
  // A diverged update leaves finite losses behind but NaN weights: never save those over
  // the last good checkpoint.
  const std::string bad = first_non_finite(checkpoint_tensors(task_.model(), optimizer_.get()));
  ST_CHECK(bad.empty(), "training diverged: '", bad, "' holds NaN or inf after step ", at.step,
           "; stopping without saving it. ", last_good_checkpoint(),
           " (try a lower --lr or --clip)");
  save_checkpoint(ckpt_path_, task_.model(), optimizer_.get(), at, meta, extra);
  // Kept beside it until the next epoch end: the state a resume on another number of
  // ranks (or batch size) starts from, after mid-epoch checkpoints replaced this one.
  if (at.batch == 0) copy_checkpoint(ckpt_path_, epoch_end_path(ckpt_path_));
}

// One optimiser step: data, forward, backward with the exchange, optimiser, metrics.
// Observers time the phases, trace them and checkpoint after the step.
bool TrainingLoop::step(const StepAt& at) {
  const int group = group_size(at.batch);
  if (group <= 0) return false;
  observers_.step_begin(at);
  StepReport r;
  r.lr = set_lr(at);
  if (!forward_overlap_) zero_grads();
  for (int k = 0; k < group; ++k) {
    if (!load_data()) return false;
    forward(at, k, r.loss);
    if (k == 0 && forward_overlap_) finish_previous_step();
    // The last micro-batch's buckets are exchanged while its backward goes on.
    observers_.timed(Phase::Backward, [&] { backward(k, group); });
  }
  r.grad_norm = finish_exchange();
  observers_.timed(Phase::Update, [&] { update(); });
  ++result_.steps;
  log_step(at, r);
  observers_.step_end(at);
  return true;
}

// The learning rate of the step's first micro-batch.
float TrainingLoop::set_lr(const StepAt& at) {
  const float lr = task_.lr(at.epoch, at.batch * c_.accum_steps);
  optimizer_->set_lr(lr);
  return lr;
}

void TrainingLoop::finish_previous_step() {
  observers_.timed(Phase::Exchange, [&] { reducer_->drain(); });
  write_step_row();
  if (order_probe_) probe_exchange_order();
  zero_grads();
}

void TrainingLoop::probe_exchange_order() {
  comm_.wait_idle();  // its agreement is a collective on this thread
  const int64_t done = result_.steps - pos_.step;
  if (!order_probe_->after_step(done, last_backward_ms_, reducer_->bucket_times(), comm_,
                                *reducer_))
    return;
  if (!quiet_)
    std::fprintf(
        stderr,
        "forward overlap: backward after the first bucket %.1f ms, exchange %.1f ms over "
        "the ranks' probed steps; the first layers' %.2f of the gradient go after backward\n",
        order_probe_->backward_ms(), order_probe_->exchange_ms(),
        reducer_->options().first_layers_first);
  order_probe_.reset();
  if (!reducer_->holds_back()) keep_step_end_update();
}

// Nothing held back means backward covers the exchange: the next forward would wait for
// the first layers' buckets, sent last, and so gain nothing, while the per-layer waits
// and the updates on the communication thread still cost (measured slower at batch 64
// and 128 in docs/RESULTS.md). Called between the forward and the backward of a step,
// with nothing in flight and before the gradients are zeroed: this step's update already
// runs at its end.
void TrainingLoop::keep_step_end_update() {
  reducer_->set_bucket_update(nullptr);
  forward_overlap_ = false;
  if (!quiet_)
    std::fprintf(stderr,
                 "forward overlap off: that share holds back no bucket (backward covers the "
                 "exchange), so buckets overlap backward only and each step ends with the "
                 "update\n");
}

// Also after keep_step_end_update(): the checkpoint schedule still queues its polls on
// the communication thread (planned when forward overlap was on), and the collectives
// that follow on this thread must not run beside one.
void TrainingLoop::settle() {
  reducer_->drain();
  comm_.wait_idle();
  write_step_row();
}

void TrainingLoop::write_step_row() {
  if (!pending_row_) return;
  MetricRow& row = *pending_row_;
  if (sparsify_) add_sparsify_metrics(sparsify_->take_stats(), row);
  precision_.add_metrics(row);
  iter_log_.write(row);
  pending_row_.reset();
}

void TrainingLoop::zero_grads() {
  flat_.zero_grads();
  if (sq_grads_) sq_grads_->zero();
  if (precision_.scales_loss()) save_buffers();
}

// The next micro-batch's input; false when the epoch's data ended.
bool TrainingLoop::load_data() {
  observers_.phase_begin(Phase::Data);
  if (!task_.load_batch()) return false;
  observers_.phase_end(Phase::Data);
  return true;
}

// Forward of micro-batch `k`, its loss added to `sum`.
void TrainingLoop::forward(const StepAt& at, int k, StepLoss& sum) {
  const StepLoss m = observers_.timed(Phase::Forward, [&] { return task_.forward_loss(); });
  if (!std::isfinite(m.loss))
    ST_THROW("loss is ", m.loss, " at iteration ", result_.steps, " (epoch ", at.epoch, ", ",
             task_.step_name(), " ", at.batch * c_.accum_steps + k, "); stopping. ",
             last_good_checkpoint(), " (try a lower --lr or --clip)");
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
    norm = observers_.timed(Phase::Clip, [&] { return clip_grad_norm(flat_.params(), c_.clip); });
  observers_.timed(Phase::Exchange, [&] { reducer_->finalize(); });
  return norm;
}

// fp16: an overflowed step is skipped (the loss scaler lowers its scale). With forward
// overlap the buckets update themselves.
void TrainingLoop::update() {
  if (forward_overlap_) return;
  if (!precision_.unscale_and_check(flat_.grads(), comm_)) {
    restore_buffers();
    return;
  }
  if (!task_.clips_before_exchange() && c_.clip > 0) clip_grad_norm(flat_.params(), c_.clip);
  optimizer_->step();
}

// The step's metrics row, and every --log-every steps (and at an epoch's last) the
// progress line.
void TrainingLoop::log_step(const StepAt& at, StepReport& r) {
  StepLoss& s = r.loss;
  s.loss /= static_cast<float>(s.count);  // the sum over the micro-batches becomes the mean
  const StepTimes& t = timing_->times();
  sums_.add(s.loss, s.count, s.correct);
  const double iter_s = (t.data + t.compute()) / 1e3;
  MetricRow row{{"epoch", at.epoch},
                {"iter", at.batch},
                {"step", result_.steps},
                {"loss", static_cast<double>(s.loss)}};
  if (task_.quality() == QualityMetric::Accuracy)
    row.push_back({"acc", 100.0 * static_cast<double>(s.correct) / s.count});
  else
    row.push_back({"ppl", perplexity(s.loss)});
  row.push_back({"lr", static_cast<double>(r.lr)});
  if (task_.clips_before_exchange()) row.push_back({"grad_norm", r.grad_norm});
  row.insert(row.end(),
             {{std::string(task_.item_name()) + "_per_s", s.count * comm_.size() / iter_s},
              {"data_ms", t.data},
              {"fwd_ms", t.fwd},
              {"bwd_ms", t.bwd},
              {"comm_ms", t.comm},
              {"opt_ms", t.opt},
              {"wall_s", wall_.seconds()}});
  last_backward_ms_ = t.bwd;
  pending_row_ = std::move(row);
  // The sparsifier's statistics of this step are complete once its buckets are.
  if (!forward_overlap_ || !sparsify_) write_step_row();
  if (quiet_ || (result_.steps % c_.log_every != 0 && at.batch + 1 != steps_per_epoch())) return;
  print_progress(at, r);
}

void TrainingLoop::print_progress(const StepAt& at, const StepReport& r) const {
  const double step_s = timing_->seconds_per_step();
  const double eta = step_s * static_cast<double>(total_steps_ - result_.steps);
  const double mean = sums_.loss_sum() / sums_.items();
  char quality[32];
  if (task_.quality() == QualityMetric::Accuracy)
    std::snprintf(quality, sizeof quality, "acc %.1f%%", 100.0 * sums_.correct() / sums_.items());
  else
    std::snprintf(quality, sizeof quality, "ppl %.1f", perplexity(mean));
  std::fprintf(stderr, "%sepoch %ld/%ld  %s %ld/%ld  loss %.4f  %s  lr %.4g  %.0f %s/s  ETA %s%s",
               tty_ ? "\r" : "", static_cast<long>(at.epoch + 1), static_cast<long>(c_.epochs),
               task_.step_name(), static_cast<long>(at.batch + 1),
               static_cast<long>(steps_per_epoch()), mean, quality, r.lr,
               r.loss.count * comm_.size() / step_s, task_.item_name(),
               format_duration(eta).c_str(), tty_ ? "   " : "\n");
}

void TrainingLoop::end_epoch(int64_t epoch, double epoch_s) {
  result_.last_eval = evaluate(true);
  const float epoch_lr = task_.end_epoch(epoch, result_.last_eval);
  // The epoch's training loss (and accuracy) over all ranks.
  const double loss_sum = comm_.allreduce_scalar(sums_.loss_sum());
  const double seen = comm_.allreduce_scalar(sums_.items());
  const double correct = comm_.allreduce_scalar(static_cast<double>(sums_.correct()));
  const double train_loss = seen > 0 ? loss_sum / seen : 0.0;
  const bool acc = task_.quality() == QualityMetric::Accuracy;
  MetricRow row{{"epoch", epoch}, {"step", result_.steps}, {"train_loss", train_loss}};
  if (acc)
    row.push_back({"train_acc", seen > 0 ? 100.0 * std::floor(correct + 0.5) / seen : 0.0});
  else
    row.push_back({"train_ppl", perplexity(train_loss)});
  row.insert(row.end(), result_.last_eval.columns.begin(), result_.last_eval.columns.end());
  if (!acc) row.push_back({"lr", static_cast<double>(epoch_lr)});
  row.insert(row.end(),
             {{"epoch_s", epoch_s}, {"wall_s", wall_.seconds()}, {"peak_rss_mb", peak_rss_mb()}});
  epoch_log_.write(row);
  schedule_->save({epoch + 1, 0, result_.steps});
  if (quiet_) return;
  char quality[32];
  if (acc)
    std::snprintf(quality, sizeof quality, "acc %.2f%%",
                  seen > 0 ? 100.0 * std::floor(correct + 0.5) / seen : 0.0);
  else
    std::snprintf(quality, sizeof quality, "ppl %.2f", perplexity(train_loss));
  std::fprintf(stderr, "%sepoch %ld done in %s: train loss %.4f %s | %s\n", tty_ ? "\n" : "",
               static_cast<long>(epoch + 1), format_duration(epoch_s).c_str(), train_loss, quality,
               result_.last_eval.summary.c_str());
}

LoopResult TrainingLoop::finish() {
  settle();
  observers_.run_end();
  result_.seconds = wall_.seconds();
  result_.mean_step_ms = timing_->mean_step_ms();
  return result_;
}

void TrainingLoop::report_interrupt() {
  result_.interrupted_by = StopSignals::received();
  if (leader_)
    std::fprintf(stderr,
                 "%sinterrupted by %s at step %ld; checkpoint %s (continue with --resume %s)\n",
                 tty_ ? "\n" : "", StopSignals::name(result_.interrupted_by),
                 static_cast<long>(result_.steps), ckpt_path_.c_str(), ckpt_path_.c_str());
}

void TrainingLoop::stop_at_limit() {
  result_.last_eval = evaluate(false);
  if (!quiet_)
    std::fprintf(stderr, "%sstopped at step %ld (--max-iters): %s; checkpoint %s\n",
                 tty_ ? "\n" : "", static_cast<long>(result_.steps),
                 result_.last_eval.summary.c_str(), ckpt_path_.c_str());
}

LoopResult TrainingLoop::run() {
  StopSignals signals;
  for (int64_t epoch = pos_.epoch; epoch < c_.epochs; ++epoch) {
    // Checkpoint positions count the task's micro-batches.
    const int64_t first = epoch == pos_.epoch ? pos_.batch : 0;
    task_.start_epoch(epoch, first);
    Timer epoch_timer;
    sums_.begin_epoch(epoch == pos_.epoch && first > 0);
    for (int64_t b = first / c_.accum_steps; step({epoch, b, result_.steps}); ++b) {
      // The checkpoint schedule decided after the step.
      if (schedule_->interrupted()) {
        report_interrupt();
        return finish();
      }
      if (schedule_->at_limit()) {
        stop_at_limit();
        return finish();
      }
    }
    end_epoch(epoch, epoch_timer.seconds());
    if (schedule_->stop_after_epoch()) {
      report_interrupt();
      break;
    }
    if (result_.steps >= total_steps_) break;
  }
  return finish();
}

}  // namespace

OutDirClaim prepare_run(const TrainConfig& c, Communicator& comm) {
  check_config(c);
  check_same_config_on_all_ranks(c, comm);
  if (comm.rank() != 0) return {};
  check_run_paths(c);  // before anything is made
  fs::create_directories(c.out);
  OutDirClaim claim(c.out);
  prepare_out_dir(c);
  return claim;
}

LoopResult run_training(const TrainConfig& c, TrainingTask& task, Communicator& comm) {
  TrainingLoop loop(c, task, comm);
  return loop.run();
}

}  // namespace st
