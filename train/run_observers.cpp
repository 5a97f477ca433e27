#include "train/run_observers.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "train/trace_observer.h"

namespace st {

void RunObservers::add(const TrainConfig& c, const CheckpointSchedule::Plan& plan, int64_t start,
                       CheckpointSchedule::Save save, Layer& model, Reducer& reducer,
                       Communicator& comm) {
  timing = &all.add(std::make_unique<StepTiming>());
  schedule = &all.add(std::make_unique<CheckpointSchedule>(plan, comm, std::move(save)));
  if (c.trace.empty()) return;
  const int64_t first = std::min(start + 5, std::max(start, plan.last_step - c.trace_iters));
  all.add(std::make_unique<TraceObserver>(
      TraceObserver::Window{c.trace, first, c.trace_iters, start}, model, reducer, comm));
}

}  // namespace st
