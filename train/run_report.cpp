#include "train/run_report.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "models/summary.h"
#include "train/checkpoint_schedule.h"

namespace st {

namespace fs = std::filesystem;

namespace {

// "1m05s", "2h03m".
std::string format_duration(double s) {
  char buf[32];
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", static_cast<long>(t / 3600),
                  static_cast<long>(t % 3600 / 60));
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", static_cast<long>(t / 60),
                  static_cast<long>(t % 60));
  return buf;
}

// Peak resident memory of this process in MB.
double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

}  // namespace

RunReport::RunReport(const TrainConfig& c, const TrainingTask& task, Communicator& comm)
    : c_(c),
      task_(task),
      comm_(comm),
      leader_(comm.rank() == 0),
      quiet_(c.quiet || comm.rank() != 0),
      tty_(isatty(STDERR_FILENO)) {}

void RunReport::setup(Layer& model, const std::string& buckets,
                      const std::string& placement) const {
  if (c_.summary && leader_) {
    // One example of the run's data: the shapes and multiply-adds per example.
    std::vector<int64_t> input = task_.example_shape().dims();
    if (!input.empty()) input.insert(input.begin(), 1);
    std::fputs(
        layer_table(model, "--arch " + c_.arch + " as this run trains it", Shape(input)).c_str(),
        stderr);
  }
  if (c_.print_buckets && leader_) std::fputs(buckets.c_str(), stderr);
  if (c_.print_placement)
    std::fprintf(stderr, "%s, device %s\n", placement.c_str(), task_.device().str().c_str());
}

void RunReport::resumed(const TrainPosition& at) const {
  if (!c_.quiet && leader_)
    std::fprintf(stderr, "resumed from %s at epoch %ld %s %ld (step %ld)\n", c_.resume.c_str(),
                 static_cast<long>(at.epoch), task_.step_name(), static_cast<long>(at.batch),
                 static_cast<long>(at.step));
}

void RunReport::open(const TrainPosition& resumed, const nlohmann::json& config) {
  if (!leader_) return;
  fs::create_directories(c_.out);
  const MetricsFormat fmt = parse_metrics_format(c_.metrics_format);
  const std::string ext = fmt == MetricsFormat::Csv ? ".csv" : ".jsonl";
  const bool append = !c_.resume.empty();
  const fs::path iter_path = fs::path(c_.out) / ("iterations" + ext);
  const fs::path epoch_path = fs::path(c_.out) / ("epochs" + ext);
  if (append) {
    truncate_metrics(iter_path.string(), fmt, "step", resumed.step + 1);
    truncate_metrics(epoch_path.string(), fmt, "epoch", resumed.epoch);
    note_metrics_in_other_format(c_.out, fmt);
  }
  iter_log_ = MetricsWriter(iter_path.string(), fmt, append);
  epoch_log_ = MetricsWriter(epoch_path.string(), fmt, append);
  if (std::FILE* f = std::fopen((fs::path(c_.out) / "config.json").c_str(), "w")) {
    std::fputs(config.dump(2).c_str(), f);
    std::fclose(f);
  }
  const std::string line = task_.startup_line();
  if (!c_.quiet && !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
}

void RunReport::step(const StepAt& at, int64_t steps, int64_t steps_per_epoch, int64_t total_steps,
                     StepReport& r, const StepTiming& timing) {
  StepLoss& s = r.loss;
  s.loss /= static_cast<float>(s.count);  // the sum over the micro-batches becomes the mean
  const StepTimes& t = timing.times();
  sums_.add(s.loss, s.count, s.correct);
  const double iter_s = (t.data + t.compute()) / 1e3;
  MetricRow row{{"epoch", at.epoch},
                {"iter", at.batch},
                {"step", steps},
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
  held_row_ = std::move(row);
  if (quiet_ || (steps % c_.log_every != 0 && at.batch + 1 != steps_per_epoch)) return;
  print_progress(at, steps_per_epoch, total_steps - steps, r, timing);
}

void RunReport::write_held_row(const std::function<void(MetricRow&)>& complete) {
  if (!held_row_) return;
  complete(*held_row_);
  iter_log_.write(*held_row_);
  held_row_.reset();
}

void RunReport::print_progress(const StepAt& at, int64_t steps_per_epoch, int64_t steps_left,
                               const StepReport& r, const StepTiming& timing) const {
  const double step_s = timing.seconds_per_step();
  const double eta = step_s * static_cast<double>(steps_left);
  const double mean = sums_.loss_sum() / sums_.items();
  char quality[32];
  if (task_.quality() == QualityMetric::Accuracy)
    std::snprintf(quality, sizeof quality, "acc %.1f%%", 100.0 * sums_.correct() / sums_.items());
  else
    std::snprintf(quality, sizeof quality, "ppl %.1f", perplexity(mean));
  std::fprintf(stderr, "%sepoch %ld/%ld  %s %ld/%ld  loss %.4f  %s  lr %.4g  %.0f %s/s  ETA %s%s",
               tty_ ? "\r" : "", static_cast<long>(at.epoch + 1), static_cast<long>(c_.epochs),
               task_.step_name(), static_cast<long>(at.batch + 1),
               static_cast<long>(steps_per_epoch), mean, quality, r.lr,
               r.loss.count * comm_.size() / step_s, task_.item_name(),
               format_duration(eta).c_str(), tty_ ? "   " : "\n");
}

void RunReport::epoch(int64_t epoch, int64_t steps, double epoch_s,
                      const TrainingTask::Evaluation& ev, float lr) {
  // The epoch's training loss (and accuracy) over all ranks.
  const double loss_sum = comm_.allreduce_scalar(sums_.loss_sum());
  const double seen = comm_.allreduce_scalar(sums_.items());
  const double correct = comm_.allreduce_scalar(static_cast<double>(sums_.correct()));
  const double train_loss = seen > 0 ? loss_sum / seen : 0.0;
  const double train_acc = seen > 0 ? 100.0 * std::floor(correct + 0.5) / seen : 0.0;
  const bool acc = task_.quality() == QualityMetric::Accuracy;
  MetricRow row{{"epoch", epoch}, {"step", steps}, {"train_loss", train_loss}};
  if (acc)
    row.push_back({"train_acc", train_acc});
  else
    row.push_back({"train_ppl", perplexity(train_loss)});
  row.insert(row.end(), ev.columns.begin(), ev.columns.end());
  if (!acc) row.push_back({"lr", static_cast<double>(lr)});
  row.insert(row.end(),
             {{"epoch_s", epoch_s}, {"wall_s", wall_.seconds()}, {"peak_rss_mb", peak_rss_mb()}});
  epoch_log_.write(row);
  if (quiet_) return;
  char quality[32];
  if (acc)
    std::snprintf(quality, sizeof quality, "acc %.2f%%", train_acc);
  else
    std::snprintf(quality, sizeof quality, "ppl %.2f", perplexity(train_loss));
  std::fprintf(stderr, "%sepoch %ld done in %s: train loss %.4f %s | %s\n", tty_ ? "\n" : "",
               static_cast<long>(epoch + 1), format_duration(epoch_s).c_str(), train_loss, quality,
               ev.summary.c_str());
}

void RunReport::interrupted(int signal, int64_t steps, const std::string& checkpoint) const {
  if (leader_)
    std::fprintf(stderr,
                 "%sinterrupted by %s at step %ld; checkpoint %s (continue with --resume %s)\n",
                 tty_ ? "\n" : "", StopSignals::name(signal), static_cast<long>(steps),
                 checkpoint.c_str(), checkpoint.c_str());
}

void RunReport::stopped_at_limit(int64_t steps, const std::string& summary,
                                 const std::string& checkpoint) const {
  if (!quiet_)
    std::fprintf(stderr, "%sstopped at step %ld (--max-iters): %s; checkpoint %s\n",
                 tty_ ? "\n" : "", static_cast<long>(steps), summary.c_str(), checkpoint.c_str());
}

}  // namespace st
