#include "train/run_progress.h"

#include <algorithm>
#include <limits>

namespace st {

void RunProgress::start_at(const TrainPosition& resumed) {
  start_ = resumed;
  result.steps = resumed.step;
  const int64_t left =
      (c_.epochs - resumed.epoch) * steps_per_epoch() - resumed.batch / c_.accum_steps;
  const int64_t limit = c_.max_iters > 0 ? c_.max_iters : std::numeric_limits<int64_t>::max();
  total_steps_ = std::min<int64_t>(limit, resumed.step + left);
}

int RunProgress::group_size(int64_t b) const {
  return static_cast<int>(std::min<int64_t>(c_.accum_steps, micro_batches_ - b * c_.accum_steps));
}

CheckpointSchedule::Plan RunProgress::checkpoint_plan(bool lagged) const {
  return {c_.checkpoint_every, c_.checkpoint_minutes, total_steps_, steps_per_epoch(),
          c_.accum_steps,      micro_batches_,        lagged};
}

}  // namespace st
