// What differs between kinds of training, as the one training loop
// (train/training_loop.h) sees it: a TrainingTask supplies how a step's input is
// produced, the loss, evaluation, carried state and its checkpointing, whether clipping
// happens before the exchange, and the LR policy; the loop returns a LoopResult.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "layers/layer.h"
#include "train/checkpoint.h"
#include "train/metrics.h"

namespace st {

// One step's loss on this rank.
struct StepLoss {
  float loss = 0;       // mean over `count` items
  double count = 0;     // images or tokens
  int64_t correct = 0;  // correctly classified items (classification tasks)
};

// How a task reports the quality of its predictions next to the loss.
enum class QualityMetric { Accuracy, Perplexity };

// exp(mean loss per token), clamped so a diverged loss prints a number.
inline double perplexity(double loss) {
  return std::exp(std::min(loss, 700.0));
}

class TrainingTask {
 public:
  virtual ~TrainingTask() = default;

  virtual Layer& model() = 0;
  virtual Device device() const = 0;
  virtual QualityMetric quality() const = 0;
  // Names in metrics and the progress line: "images" / "tokens", "batch" / "window".
  virtual const char* item_name() const = 0;
  virtual const char* step_name() const = 0;
  // Local clipping of this rank's gradient before the exchange (the language model's
  // rule); otherwise --clip acts on the averaged gradient after it (PyTorch DDP order).
  virtual bool clips_before_exchange() const = 0;
  virtual int64_t steps_per_epoch() const = 0;
  // Positions the data at step `first` of `epoch` and sets up carried state.
  virtual void start_epoch(int64_t epoch, int64_t first) = 0;
  // Produces the next step's input; false at the end of the epoch.
  virtual bool load_batch() = 0;
  virtual StepLoss forward_loss() = 0;
  // d(loss)/d(output) of the last forward_loss().
  virtual Tensor loss_grad() = 0;
  virtual void after_step() {}

  // The learning rate of step `b` of `epoch` (base rate: lr).
  virtual float lr(int64_t epoch, int64_t b) const = 0;
  // Evaluation after an epoch (`epoch_end`) or at a --max-iters stop: metric columns
  // (e.g. test_loss, test_acc) and a short human summary. Collective.
  struct Evaluation {
    MetricRow columns;
    std::string summary;
    double loss = 0;  // the figure the task's LR policy and results read
  };
  virtual Evaluation evaluate(bool epoch_end) = 0;
  // After an epoch's evaluation: the LR policy's update and the carried state's reset.
  // Returns the learning rate the epoch row reports.
  virtual float end_epoch(int64_t epoch, const Evaluation&) = 0;

  // Run metadata (checkpoint metadata and config.json) and extra config.json entries.
  virtual std::map<std::string, std::string> metadata() const = 0;
  virtual void add_config(nlohmann::json& /*config*/) const {}
  // A line printed at start on rank 0 ("" = none).
  virtual std::string startup_line() const { return ""; }
  // One example's input shape without the batch ([3, 32, 32]), for the output shapes of
  // `train --summary`; empty where the model takes no image (the language model).
  virtual Shape example_shape() const { return {}; }
  // State beyond model, optimiser and exchange for a checkpoint: tensors and metadata.
  // Collective (every rank calls it; only rank 0's result is written).
  virtual void checkpoint_state(std::vector<std::pair<std::string, Tensor>>&,
                                std::map<std::string, std::string>&) {}
  // On --resume, after the model and optimiser were loaded from `path`.
  virtual void restore(const std::string& /*path*/, const std::map<std::string, std::string>&,
                       const TrainPosition&) {}
};

struct LoopResult {
  TrainingTask::Evaluation last_eval;  // of the last epoch or the --max-iters stop
  bool evaluated = false;
  int64_t steps = 0;
  double seconds = 0;
  double mean_step_ms = 0;  // forward + backward + exchange + update, without the first 5
  int interrupted_by = 0;   // the stop signal (SIGINT, SIGTERM, SIGUSR1, SIGHUP), 0 = none
};

}  // namespace st
