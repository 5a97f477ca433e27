// What watches a training step without taking part in it: the phase timing behind the
// metrics' *_ms columns (train/step_timing.*), the Chrome trace (train/trace_observer.*),
// the checkpoint schedule and stop conditions (train/checkpoint_schedule.*). The loop
// announces a step's start and end and the edges of its phases; observers keep their
// own state, so the step itself reads as data, forward, backward, optimiser, metrics.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace st {

// The parts of an optimiser step, in order. With --accum-steps N, Data, Forward and
// Backward repeat N times. Clip is --clip on this rank's gradient before the exchange;
// Exchange is the exposed wait for the buckets backward did not hide; Update is the
// global clip and the optimiser (or an fp16 overflow's skip).
enum class Phase { Data, Forward, Backward, Clip, Exchange, Update };

// Which optimiser step: of `epoch`, the epoch's `batch`-th (counting optimiser steps, not
// micro-batches), the run's `step`-th (0-based: the steps done before it, resumed ones
// included).
struct StepAt {
  int64_t epoch = 0, batch = 0, step = 0;
  int64_t steps_done() const { return step + 1; }
};

class StepObserver {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~StepObserver() = default;
  virtual void on_step_begin(const StepAt& /*at*/) {}
  // `at` is the one clock reading every observer of this edge shares.
  virtual void on_phase_begin(Phase /*phase*/, Clock::time_point /*at*/) {}
  virtual void on_phase_end(Phase /*phase*/, Clock::time_point /*at*/) {}
  // After the step's update and its metrics row.
  virtual void on_step_end(const StepAt& /*at*/) {}
  // The run ends normally (not on an exception). May be collective.
  virtual void on_run_end() {}
};

// The loop's observers, told in the order they were added.
class StepObservers {
 public:
  template <class T>
  T& add(std::unique_ptr<T> observer) {
    T& ref = *observer;
    observers_.push_back(std::move(observer));
    return ref;
  }
  void step_begin(const StepAt& at) {
    for (auto& o : observers_) o->on_step_begin(at);
  }
  void phase_begin(Phase phase) {
    const StepObserver::Clock::time_point now = StepObserver::Clock::now();
    for (auto& o : observers_) o->on_phase_begin(phase, now);
  }
  void phase_end(Phase phase) {
    const StepObserver::Clock::time_point now = StepObserver::Clock::now();
    for (auto& o : observers_) o->on_phase_end(phase, now);
  }
  // Runs `work` as `phase`; on an exception the phase has no end.
  template <class Work>
  decltype(auto) timed(Phase phase, Work&& work) {
    phase_begin(phase);
    if constexpr (std::is_void_v<decltype(work())>) {
      work();
      phase_end(phase);
    } else {
      decltype(auto) result = work();
      phase_end(phase);
      return result;
    }
  }
  void step_end(const StepAt& at) {
    for (auto& o : observers_) o->on_step_end(at);
  }
  void run_end() {
    for (auto& o : observers_) o->on_run_end();
  }

 private:
  std::vector<std::unique_ptr<StepObserver>> observers_;
};

}  // namespace st
