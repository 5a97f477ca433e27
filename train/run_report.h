// What a run tells as it goes: the metrics rows (iterations and epochs files and
// config.json, written by rank 0), the progress line, the epoch line and the stop
// messages. The epoch's running sums behind the lines and rows (EpochSums) live here;
// a mid-epoch checkpoint saves them and a resume restores them.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "core/timer.h"
#include "layers/layer.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/epoch_sums.h"
#include "train/metrics.h"
#include "train/step_observer.h"
#include "train/step_timing.h"
#include "train/training_task.h"

namespace st {

class Communicator;

// What a step's metrics row reports besides its phase times.
struct StepReport {
  StepLoss loss;  // summed over the micro-batches until step() takes the mean per item
  float lr = 0;
  double grad_norm = 0;  // of the local clip, when the task clips before the exchange
};

class RunReport {
 public:
  RunReport(const TrainConfig& c, const TrainingTask& task, Communicator& comm);

  // --summary (rank 0: the table of `model`'s layers), --print-buckets (rank 0) and
  // --print-placement (every rank, with the device).
  void setup(Layer& model, const std::string& buckets, const std::string& placement) const;
  void resumed(const TrainPosition& at) const;
  // Rank 0: the metrics files in --out (a resume cuts them back to `resumed`: the rows
  // written after it will be written again), config.json and the task's start-up line.
  void open(const TrainPosition& resumed, const nlohmann::json& config);
  // Optimiser step `at` ended as the run's `steps`-th of `total_steps`: its row (held
  // until write_held_row: the exchange's statistics complete it), the epoch's sums, and
  // every --log-every steps (and at an epoch's last) the progress line.
  void step(const StepAt& at, int64_t steps, int64_t steps_per_epoch, int64_t total_steps,
            StepReport& r, const StepTiming& timing);
  // Writes the held row, if any, after `complete` added the columns that finish it.
  void write_held_row(const std::function<void(MetricRow&)>& complete);
  // The epoch's row and line, after its evaluation; `lr`: the rate the epoch row reports.
  void epoch(int64_t epoch, int64_t steps, double epoch_s, const TrainingTask::Evaluation& ev,
             float lr);
  void interrupted(int signal, int64_t steps, const std::string& checkpoint) const;
  void stopped_at_limit(int64_t steps, const std::string& summary,
                        const std::string& checkpoint) const;

  EpochSums& sums() { return sums_; }
  double seconds() const { return wall_.seconds(); }
  bool leader() const { return leader_; }
  bool quiet() const { return quiet_; }

 private:
  void print_progress(const StepAt& at, int64_t steps_per_epoch, int64_t steps_left,
                      const StepReport& r, const StepTiming& timing) const;

  const TrainConfig& c_;
  const TrainingTask& task_;
  Communicator& comm_;
  const bool leader_, quiet_, tty_;
  MetricsWriter iter_log_, epoch_log_;
  std::optional<MetricRow> held_row_;
  EpochSums sums_;
  Timer wall_;
};

}  // namespace st
