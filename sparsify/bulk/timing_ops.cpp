#include "sparsify/bulk/timing_ops.h"

namespace st::bulk {

void PhaseClock::start(Phase p) {
  ms_.fill(0.0);
  collectives_in_segment_ = 0;
  current_ = p;
  since_ = Clock::now();
}

void PhaseClock::enter(Phase p) {
  const Clock::time_point now = Clock::now();
  const double segment = std::chrono::duration<double, std::milli>(now - since_).count();
  ms_[static_cast<size_t>(current_)] += segment - collectives_in_segment_;
  collectives_in_segment_ = 0;
  current_ = p;
  since_ = now;
}

void PhaseClock::add_collective(double ms) {
  ms_[static_cast<size_t>(Phase::Comm)] += ms;
  collectives_in_segment_ += ms;
}

// One clock read before and after each collective; every other call runs untouched.
void TimingOps::around(Call& call, FunctionRef run) {
  if (call.op.mode != OpMode::Comm) {
    run();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  run();
  clock_.add_collective(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace st::bulk
