#include "train/trace_observer.h"

#include <cstdio>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "layers/layer.h"

namespace st {

TraceObserver::TraceObserver(Window window, Layer& model, Reducer& reducer, Communicator& comm)
    : window_(std::move(window)),
      model_(model),
      reducer_(reducer),
      comm_(comm),
      trace_(comm.rank()),
      step_(window_.run_start) {
  trace_layer_backward(model_, trace_, tracing_);
}

TraceObserver::~TraceObserver() {
  model_.set_backward_observer(nullptr, "");
}

void TraceObserver::on_step_begin(const StepAt& at) {
  step_ = at.step;
  tracing_ = at.step >= window_.first && at.step < window_.first + window_.steps;
  // Every rank's clock starts at one barrier right before the traced window.
  if (tracing_ && at.step == window_.first) {
    trace_.sync_origin(comm_);
    streams_.start();
  }
  reducer_.set_tracing(tracing_);
}

void TraceObserver::on_phase_begin(Phase, Clock::time_point at) {
  phase_begin_ = at;
}

void TraceObserver::on_phase_end(Phase phase, Clock::time_point at) {
  if (!tracing_) return;
  switch (phase) {
    case Phase::Data:
      trace_.span("data wait", "data", phase_begin_, at);
      break;
    case Phase::Forward:
      // Recorded with the backward that follows, after the layers' backward spans.
      forward_ = {phase_begin_, at};
      break;
    case Phase::Backward:
      trace_.span("forward", "forward", forward_.first, forward_.second);
      trace_.span("backward step " + std::to_string(step_), "backward", phase_begin_, at);
      break;
    case Phase::Update:
      trace_reducer_timeline(trace_, reducer_);
      trace_.span("sgd step", "optimizer", phase_begin_, at);
      break;
    case Phase::Clip:
    case Phase::Exchange:  // the reducer's timeline shows the exchange
      break;
  }
}

void TraceObserver::on_step_end(const StepAt& at) {
  step_ = at.steps_done();
  if (step_ == window_.first + window_.steps) write();
}

void TraceObserver::on_run_end() {
  write();
}

// Whether the trace is empty depends only on the step count, so all ranks take the same
// branch.
void TraceObserver::write() {
  if (written_) return;
  written_ = true;
  streams_.stop_into(trace_);
  if (!trace_.empty()) {
    trace_.write_all_ranks(window_.path, comm_);
    return;
  }
  if (comm_.rank() != 0) return;
  std::fprintf(stderr,
               "note: no trace written to %s: the run took %ld step(s), and the trace starts "
               "at its step %ld\n",
               window_.path.c_str(), static_cast<long>(step_ - window_.run_start),
               static_cast<long>(window_.first - window_.run_start));
}

}  // namespace st
