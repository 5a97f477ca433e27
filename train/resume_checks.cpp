#include "train/resume_checks.h"

#include <filesystem>

#include "core/error.h"
#include "train/flags.h"

namespace st {

namespace {

const std::string* meta_find(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

// The flags, the ranks a mid-epoch position was cut for, the sparsifier's residuals.
// Checkpoints of older versions lack some keys; those checks are skipped.
void check_compatible(const TrainConfig& c, const std::map<std::string, std::string>& saved,
                      const std::map<std::string, std::string>& now, const TrainPosition& pos) {
  const std::string epoch_end = epoch_end_path(c.resume);
  const std::string hint = std::filesystem::exists(epoch_end) && epoch_end != c.resume
                               ? " (resume the last epoch end, " + epoch_end + ", instead)"
                               : std::string(" (a checkpoint at an epoch end can)");
  const std::string *a = meta_find(saved, "world_size"), *b = meta_find(now, "world_size");
  ST_CHECK(!a || !b || *a == *b || pos.batch == 0, c.resume,
           ": a mid-epoch checkpoint with world_size ", *a,
           " resumes only with the same world_size, not ", *b, hint);
  check_resumed_flags(c.resume, saved, now, pos, hint);
  const std::string* method = meta_find(saved, "sparsifier");
  ST_CHECK(!method || *method == "none" || c.sparsifier != "none", c.resume,
           ": the checkpoint holds the error-feedback state of --sparsifier ", *method,
           "; resuming it dense would drop those residuals. Pass --sparsifier ", *method);
}

// The position lies inside an epoch and a step count can reach it.
void check_position(const TrainConfig& c, const TrainPosition& at,
                    int64_t micro_batches_per_epoch) {
  constexpr int64_t kMaxStep = int64_t{1} << 53;  // steps are also written as doubles
  const std::string& path = c.resume;
  ST_CHECK(at.step <= kMaxStep, path, ": checkpoint metadata 'step' is ", at.step,
           ", more than the 2^53 steps a run counts");
  ST_CHECK(at.batch <= micro_batches_per_epoch, path, ": checkpoint metadata 'batch' is ", at.batch,
           ", past the end of an epoch (", micro_batches_per_epoch, ")");
  // Every finished epoch took a step at least, and this one ceil(batch / accum) steps:
  // a smaller step count would misplace the metrics cut-back and the schedule.
  const int64_t at_least = at.epoch + (at.batch + c.accum_steps - 1) / c.accum_steps;
  ST_CHECK(at.step >= at_least, path, ": checkpoint metadata 'step' is ", at.step,
           ", fewer than its position allows (epoch ", at.epoch, ", batch ", at.batch,
           ": at least ", at_least, ")");
}

// A resume that would only rewrite the checkpoint is refused.
void check_something_left(const TrainConfig& c, const TrainPosition& at) {
  const std::string& path = c.resume;
  ST_CHECK(at.epoch < c.epochs, path, " has completed ", at.epoch, " epoch(s): --epochs ", c.epochs,
           " leaves nothing to train (pass a larger --epochs)");
  ST_CHECK(c.max_iters == 0 || c.max_iters > at.step, path, " is at step ", at.step,
           ": --max-iters ", c.max_iters, " leaves nothing to train (pass a larger --max-iters)");
}

}  // namespace

void check_resume(const TrainConfig& c, const std::map<std::string, std::string>& saved,
                  const std::map<std::string, std::string>& now, const TrainPosition& at,
                  int64_t micro_batches_per_epoch) {
  check_compatible(c, saved, now, at);
  check_position(c, at, micro_batches_per_epoch);
  check_something_left(c, at);
}

}  // namespace st
