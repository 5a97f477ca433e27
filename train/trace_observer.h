// --trace as a step observer: records a window of steps (data wait, forward, backward
// with each layer's span, the reducer's bucket timeline, the optimiser step and, on the
// emulated device, what each stream ran) on every rank and writes them into one Chrome
// trace when the window closes or the run ends (train/trace.h, docs/TRACE.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "train/step_observer.h"
#include "train/trace.h"

namespace st {

class Communicator;
class Layer;
class Reducer;

class TraceObserver : public StepObserver {
 public:
  // Steps [first, first + steps) of the run into `path`. `run_start` is the step the run
  // began at (the note about an empty trace counts from it).
  struct Window {
    std::string path;
    int64_t first = 0, steps = 0, run_start = 0;
  };
  TraceObserver(Window window, Layer& model, Reducer& reducer, Communicator& comm);
  ~TraceObserver() override;
  TraceObserver(const TraceObserver&) = delete;
  TraceObserver& operator=(const TraceObserver&) = delete;

  void on_step_begin(const StepAt& at) override;
  void on_phase_begin(Phase phase, Clock::time_point at) override;
  void on_phase_end(Phase phase, Clock::time_point at) override;
  void on_step_end(const StepAt& at) override;
  void on_run_end() override;

 private:
  // Collective: every rank's timeline goes into rank 0's file, once.
  void write();

  const Window window_;
  Layer& model_;
  Reducer& reducer_;
  Communicator& comm_;
  TraceWriter trace_;
  // The emulated device's streams, recorded over the window (nothing on other devices).
  EmuStreamTracks streams_;
  // Read by the layers' backward spans (trace_layer_backward).
  bool tracing_ = false;
  bool written_ = false;
  int64_t step_ = 0;  // the step being traced, or the steps done after it ends
  Clock::time_point phase_begin_;
  std::pair<Clock::time_point, Clock::time_point> forward_;  // the micro-batch's forward
};

}  // namespace st
