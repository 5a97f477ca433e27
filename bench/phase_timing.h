// The timing loop of the training-step benchmarks (train_step_bench, ncf_step_bench):
// `warmup` untimed steps, then `reps` timed ones, each step three phases run in order.
#pragma once

#include <algorithm>
#include <vector>

#include "core/timer.h"

namespace st::bench {

// Median milliseconds of each phase, and of their sum per step.
struct PhaseMedians {
  double fwd = 0, bwd = 0, opt = 0, step = 0;
};

template <class Forward, class Backward, class Update>
PhaseMedians time_phases(int warmup, int reps, Forward forward, Backward backward, Update update) {
  std::vector<double> fwd, bwd, opt, total;
  for (int r = 0; r < warmup + reps; ++r) {
    Timer t;
    forward();
    const double f = t.ms();
    t.reset();
    backward();
    const double b = t.ms();
    t.reset();
    update();
    const double o = t.ms();
    if (r < warmup) continue;
    fwd.push_back(f);
    bwd.push_back(b);
    opt.push_back(o);
    total.push_back(f + b + o);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  return {median(fwd), median(bwd), median(opt), median(total)};
}

}  // namespace st::bench
