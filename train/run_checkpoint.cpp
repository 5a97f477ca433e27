#include "train/run_checkpoint.h"

#include <exception>
#include <filesystem>

#include "core/error.h"
#include "core/safetensors.h"
#include "train/flags.h"

namespace st {

std::string checkpoint_path(const TrainConfig& c) {
  return (std::filesystem::path(c.out) / "checkpoint.safetensors").string();
}

std::map<std::string, std::string> run_metadata(const TrainConfig& c, const TrainingTask& task,
                                                int world_size, double bucket_cap_mb,
                                                const ExchangeSetup& exchange) {
  // The flags' own entries come from the flag table through the task (flag_metadata);
  // here only what no flag holds, and the cap --plan auto may have chosen over the flag's.
  std::map<std::string, std::string> meta = task.metadata();
  meta["world_size"] = std::to_string(world_size);
  if (bucket_cap_mb != c.bucket_cap_mb) meta["bucket_cap_mb"] = saved_number(bucket_cap_mb);
  exchange.add_metadata(meta);
  return meta;
}

std::string last_good_checkpoint(const std::string& path, int64_t steps_now) {
  if (!std::filesystem::exists(path)) return "No checkpoint was written yet";
  std::string step = "?";
  try {
    step = load_safetensors_metadata(path).at("step");
  } catch (const std::exception&) {
  }
  // A checkpoint of this very step holds the weights that just failed (an evaluation
  // that overflowed in 16 bits, say): not a good one to go back to.
  if (step == std::to_string(steps_now))
    return "The last checkpoint, " + path + ", holds these same weights (step " + step + ")";
  return "The last good checkpoint is " + path + " (step " + step + ")";
}

void write_run_checkpoint(const std::string& path, Layer& model, const Optimizer* optimizer,
                          const TrainPosition& at, const std::map<std::string, std::string>& meta,
                          const std::vector<std::pair<std::string, Tensor>>& extra) {
  // A diverged update leaves finite losses behind but NaN weights: never save those over
  // the last good checkpoint.
  const std::string bad = first_non_finite(checkpoint_tensors(model, optimizer));
  ST_CHECK(bad.empty(), "training diverged: '", bad, "' holds NaN or inf after step ", at.step,
           "; stopping without saving it. ", last_good_checkpoint(path, at.step),
           " (try a lower --lr or --clip)");
  save_checkpoint(path, model, optimizer, at, meta, extra);
  if (at.batch == 0) copy_checkpoint(path, epoch_end_path(path));
}

}  // namespace st
