// The training step's observers: the order they are told in, the phase timing behind
// the metrics' *_ms columns and the mean step time, the checkpoint schedule's decisions,
// the epoch sums a mid-epoch checkpoint carries, and the trace window.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/local_communicator.h"
#include "comm/reducer.h"
#include "core/error.h"
#include "core/rng.h"
#include "layers/flat_params.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "train/checkpoint_schedule.h"
#include "train/epoch_sums.h"
#include "train/step_observer.h"
#include "train/step_timing.h"
#include "train/trace_observer.h"

namespace st::test {
namespace {

using Clock = StepObserver::Clock;
using std::chrono::milliseconds;

// Writes down every call as text, into a log shared by several observers.
class Recorder : public StepObserver {
 public:
  Recorder(std::string name, std::vector<std::string>& log) : name_(std::move(name)), log_(log) {}
  void on_step_begin(const StepAt& at) override {
    log_.push_back(name_ + " begin " + std::to_string(at.step));
  }
  void on_phase_begin(Phase p, Clock::time_point at) override {
    log_.push_back(name_ + " phase+ " + std::to_string(static_cast<int>(p)));
    times.push_back(at);
  }
  void on_phase_end(Phase p, Clock::time_point at) override {
    log_.push_back(name_ + " phase- " + std::to_string(static_cast<int>(p)));
    times.push_back(at);
  }
  void on_step_end(const StepAt& at) override {
    log_.push_back(name_ + " end " + std::to_string(at.steps_done()));
  }
  void on_run_end() override { log_.push_back(name_ + " run end"); }
  std::vector<Clock::time_point> times;

 private:
  std::string name_;
  std::vector<std::string>& log_;
};

TEST(StepObservers, ToldInTheOrderAddedWithOneClockReadingPerEdge) {
  std::vector<std::string> log;
  StepObservers observers;
  Recorder& a = observers.add(std::make_unique<Recorder>("a", log));
  Recorder& b = observers.add(std::make_unique<Recorder>("b", log));
  observers.step_begin({0, 0, 7});
  EXPECT_EQ(observers.timed(Phase::Forward, [] { return 42; }), 42);
  observers.timed(Phase::Update, [] {});
  EXPECT_THROW(observers.timed(Phase::Backward, []() -> int { throw std::runtime_error("x"); }),
               std::runtime_error);
  observers.step_end({0, 0, 7});
  observers.run_end();
  const std::vector<std::string> want = {"a begin 7",  "b begin 7",  "a phase+ 1", "b phase+ 1",
                                         "a phase- 1", "b phase- 1", "a phase+ 5", "b phase+ 5",
                                         "a phase- 5", "b phase- 5", "a phase+ 2", "b phase+ 2",
                                         "a end 8",    "b end 8",    "a run end",  "b run end"};
  EXPECT_EQ(log, want) << "a phase that throws has no end";
  EXPECT_EQ(a.times, b.times);
}

// Feeds `timing` a phase of `ms` milliseconds starting at `t`, returns its end.
Clock::time_point phase(StepTiming& timing, Phase p, Clock::time_point t, int ms) {
  timing.on_phase_begin(p, t);
  const Clock::time_point end = t + milliseconds(ms);
  timing.on_phase_end(p, end);
  return end;
}

TEST(StepTiming, SumsMicroBatchesCountsClipAsOptimiserAndAveragesAfterWarmup) {
  StepTiming timing;
  Clock::time_point t = Clock::now();
  std::vector<double> compute;
  for (int64_t step = 0; step < 8; ++step) {
    timing.on_step_begin({0, step, step});
    const int scale = step < 5 ? 10 : 1;  // slow warm-up steps
    for (int k = 0; k < 2; ++k) {         // two micro-batches
      t = phase(timing, Phase::Data, t, 1);
      t = phase(timing, Phase::Forward, t, 2 * scale);
      t = phase(timing, Phase::Backward, t, 3 * scale);
    }
    t = phase(timing, Phase::Clip, t, 1);
    t = phase(timing, Phase::Exchange, t, 4);
    t = phase(timing, Phase::Update, t, 5);
    const StepTimes& s = timing.times();
    EXPECT_NEAR(s.data, 2, 1e-6);
    EXPECT_NEAR(s.fwd, 4 * scale, 1e-6);
    EXPECT_NEAR(s.bwd, 6 * scale, 1e-6);
    EXPECT_NEAR(s.comm, 4, 1e-6);
    EXPECT_NEAR(s.opt, 6, 1e-6) << "the local clip counts as optimiser work";
    const double seconds = (s.data + s.compute()) / 1e3;
    if (step == 0) {
      EXPECT_NEAR(timing.seconds_per_step(), seconds, 1e-12);
    }
    compute.push_back(s.compute());
    timing.on_step_end({0, step, step});
  }
  // Steps 5, 6, 7 only: the first five are warm-up.
  EXPECT_NEAR(timing.mean_step_ms(), (compute[5] + compute[6] + compute[7]) / 3, 1e-6);
  // The average moves a tenth of the way towards each new step.
  timing.on_step_begin({0, 8, 8});
  const double before = timing.seconds_per_step();
  phase(timing, Phase::Forward, t, 1000);
  EXPECT_NEAR(timing.seconds_per_step() - before, 0.1 * 1.0, 1e-9);
}

TEST(StepTiming, MeanOfAShortRunTakesEveryStep) {
  StepTiming timing;
  EXPECT_EQ(timing.mean_step_ms(), 0.0);
  Clock::time_point t = Clock::now();
  for (int64_t step = 0; step < 2; ++step) {
    timing.on_step_begin({0, step, step});
    t = phase(timing, Phase::Forward, t, step == 0 ? 10 : 20);
    timing.on_step_end({0, step, step});
  }
  EXPECT_NEAR(timing.mean_step_ms(), 15, 1e-6);
}

// 10 micro-batches per epoch in steps of 4: optimiser steps 0, 1 and a short step 2.
CheckpointSchedule::Plan plan(int64_t every, int64_t last_step) {
  CheckpointSchedule::Plan p;
  p.every = every;
  p.last_step = last_step;
  p.steps_per_epoch = 3;
  p.accum_steps = 4;
  p.micro_batches_per_epoch = 10;
  return p;
}

TEST(CheckpointSchedule, EveryNStepsAtTheLimitAndCountingMicroBatches) {
  LocalCommunicator comm;
  std::vector<std::string> saved;
  auto save = [&](const TrainPosition& at) {
    saved.push_back(std::to_string(at.epoch) + "/" + std::to_string(at.batch) + "/" +
                    std::to_string(at.step));
  };
  CheckpointSchedule schedule(plan(2, 5), comm, save);
  // Run steps 3, 4 (epoch 1, optimiser steps 0, 1) then 5 (the epoch's last).
  schedule.on_step_end({1, 0, 3});
  EXPECT_FALSE(schedule.at_limit());
  schedule.on_step_end({1, 1, 4});  // 5 steps done: the limit, mid-epoch
  EXPECT_TRUE(schedule.at_limit());
  EXPECT_FALSE(schedule.interrupted());
  schedule.on_step_end({1, 2, 5});  // the epoch's last step: not a mid-epoch limit
  EXPECT_FALSE(schedule.at_limit());
  schedule.save({2, 0, 6});
  // --checkpoint-every also fires at the epoch's last step, whose position is clamped to
  // the epoch's 10 micro-batches.
  EXPECT_EQ(saved, (std::vector<std::string>{"1/4/4", "1/8/5", "1/10/6", "2/0/6"}));
}

TEST(CheckpointSchedule, AStopSignalInterruptsMidEpochAndWaitsForTheEpochEnd) {
  LocalCommunicator comm;
  std::vector<TrainPosition> saved;
  CheckpointSchedule schedule(plan(0, 100), comm,
                              [&](const TrainPosition& at) { saved.push_back(at); });
  StopSignals signals;
  EXPECT_EQ(StopSignals::received(), 0);
  schedule.on_step_end({0, 0, 0});
  EXPECT_FALSE(schedule.interrupted());
  EXPECT_TRUE(saved.empty()) << "no --checkpoint-every, no minutes, no signal";
  std::raise(SIGUSR1);
  EXPECT_EQ(StopSignals::received(), SIGUSR1);
  EXPECT_STREQ(StopSignals::name(SIGUSR1), "SIGUSR1");
  schedule.on_step_end({0, 1, 1});
  EXPECT_TRUE(schedule.interrupted());
  EXPECT_FALSE(schedule.stop_after_epoch());
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].batch, 8);
  schedule.on_step_end({0, 2, 2});
  EXPECT_FALSE(schedule.interrupted());
  EXPECT_TRUE(schedule.stop_after_epoch());
  EXPECT_EQ(saved.size(), 1u) << "the epoch end writes that checkpoint";
}

TEST(EpochSums, AMidEpochCheckpointRestoresThisRanksSums) {
  LocalCommunicator comm;
  EpochSums sums;
  sums.add(0.5f, 4, 3);
  sums.add(0.25f, 4, 1);
  std::map<std::string, std::string> meta;
  sums.save(meta, comm);
  EXPECT_EQ(meta.count("epoch_sums"), 1u);
  EXPECT_EQ(meta.count("epoch_sums_by_rank"), 1u);
  EpochSums resumed;
  resumed.restore(meta, comm, "ck");
  resumed.begin_epoch(true);
  EXPECT_EQ(resumed.loss_sum(), 3.0);
  EXPECT_EQ(resumed.items(), 8.0);
  EXPECT_EQ(resumed.correct(), 4);
  resumed.begin_epoch(false);
  EXPECT_EQ(resumed.items(), 0.0);
  // A checkpoint with only the total (older versions): rank 0 takes it.
  meta.erase("epoch_sums_by_rank");
  EpochSums old;
  old.restore(meta, comm, "ck");
  old.begin_epoch(true);
  EXPECT_EQ(old.loss_sum(), 3.0);
}

// Damaged sums are refused in one line naming the key; no sums at all resume from zero.
TEST(EpochSums, DamagedSumsAreRefusedAndMissingOnesStartFromZero) {
  LocalCommunicator comm;
  const auto error_of = [&](const std::map<std::string, std::string>& meta) {
    EpochSums sums;
    try {
      sums.restore(meta, comm, "ck");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string good = "3 8 4";
  EXPECT_EQ(error_of({{"epoch_sums", good}, {"epoch_sums_by_rank", good}}), "");
  for (const char* bad : {"abc", "3 8", "3 8 4 5", "nan 8 4", "3 -8 0", "3 8 9", "3 8 1.5"})
    EXPECT_NE(error_of({{"epoch_sums", good}, {"epoch_sums_by_rank", bad}})
                  .find("ck: checkpoint metadata 'epoch_sums_by_rank' holds '" + std::string(bad)),
              std::string::npos)
        << bad;
  EXPECT_NE(error_of({{"epoch_sums", good}, {"epoch_sums_by_rank", "3 8 4;1 2 1"}})
                .find("holds 2 rank(s)' sums, not the 1 of this run"),
            std::string::npos);
  EXPECT_NE(error_of({{"epoch_sums", "3 9 4"}, {"epoch_sums_by_rank", good}})
                .find("adds up to another total"),
            std::string::npos);
  EXPECT_NE(error_of({{"epoch_sums", "x"}}).find("'epoch_sums' holds 'x'"), std::string::npos);
  EpochSums none;
  none.restore({}, comm, "ck");
  none.begin_epoch(true);
  EXPECT_EQ(none.items(), 0.0);
}

TEST(TraceObserver, RecordsItsWindowAndWritesWhenItCloses) {
  LocalCommunicator comm;
  Rng rng(1);
  Sequential net;
  net.add("fc", std::make_unique<Linear>(3, 2, true, rng));
  FlatParams flat(net, Device::cpu());
  Reducer reducer(flat, comm, std::make_shared<AllreduceHook>(), ReducerOptions{});
  const std::string path =
      (std::filesystem::temp_directory_path() / "step_observer_trace.json").string();
  std::filesystem::remove(path);
  StepObservers observers;
  observers.add(
      std::make_unique<TraceObserver>(TraceObserver::Window{path, 11, 1, 10}, net, reducer, comm));
  for (int64_t step = 10; step < 13; ++step) {
    observers.step_begin({0, step, step});
    EXPECT_EQ(reducer.tracing(), step == 11);
    for (Phase p : {Phase::Data, Phase::Forward, Phase::Backward, Phase::Update})
      observers.timed(p, [] {});
    observers.step_end({0, step, step});
    EXPECT_EQ(std::filesystem::exists(path), step >= 11) << "written when the window closes";
  }
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::vector<std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") names.push_back(e["name"]);
  EXPECT_EQ(names,
            (std::vector<std::string>{"data wait", "forward", "backward step 11", "sgd step"}));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace st::test
