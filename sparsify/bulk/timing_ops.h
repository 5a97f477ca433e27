// Phase timing of an exchange without a timer in the algorithm: the exchange pattern says
// which phase it is in (one PhaseClock::enter per phase boundary), and TimingOps, a
// decorator around the exchange's bulk::Ops, times every collective.
//
// Attribution rule (the sp_*_ms columns, docs/SPARSIFIERS.md): a phase's time is the wall
// time on the communication thread from the enter() that starts it to the next enter(),
// minus the time spent inside collectives (Ops calls of mode Comm) meanwhile; the comm
// phase is the time inside collectives, wherever they are called, plus the segments that
// are entered as comm. Phase::Other is bookkeeping between phases and is not reported.
// On a device whose calls return before they complete (CUDA, the emulated device) a
// phase holds the time to issue its calls; a call that waits holds the wait.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "sparsify/bulk/decorator.h"

namespace st::bulk {

enum class Phase : uint8_t { Ef, Select, Pack, Comm, Decode, Update, Other };

class PhaseClock {
 public:
  // Clears every phase and starts the clock in `p`.
  void start(Phase p);
  // Closes the current phase's segment and continues in `p`.
  void enter(Phase p);
  // A collective of `ms` milliseconds ran inside the current segment.
  void add_collective(double ms);
  Phase current() const { return current_; }
  // Milliseconds attributed to `p` so far (the current segment counts once it is closed).
  double ms(Phase p) const { return ms_[static_cast<size_t>(p)]; }

 private:
  using Clock = std::chrono::steady_clock;
  std::array<double, 7> ms_{};
  Phase current_ = Phase::Other;
  Clock::time_point since_ = Clock::now();
  double collectives_in_segment_ = 0;
};

// Enters a phase for a scope and goes back to the one before at its end (a helper that
// is all one phase, whoever calls it).
class PhaseScope {
 public:
  PhaseScope(PhaseClock& clock, Phase p) : clock_(clock), before_(clock.current()) {
    clock_.enter(p);
  }
  ~PhaseScope() { clock_.enter(before_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseClock& clock_;
  Phase before_;
};

class TimingOps : public Decorator {
 public:
  TimingOps(OpsPtr target, PhaseClock& clock)
      : Decorator(*target), owned_(std::move(target)), clock_(clock) {}

 protected:
  void around(Call& call, FunctionRef run) override;

 private:
  OpsPtr owned_;
  PhaseClock& clock_;
};

}  // namespace st::bulk
