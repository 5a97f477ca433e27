// The folder a run writes (--out) and the other paths it writes (--trace): what may be
// written there, the claim that keeps a second run out, and what a new run does with a
// run already there. sparsetrain writes and removes only regular files it names and
// folders it makes: a device node, a symlink or a folder where one of its files belongs
// is refused at start, before anything is written.
#pragma once

#include <string>
#include <vector>

#include "core/output_paths.h"
#include "train/config.h"

namespace st {

// The files a run writes into --out (the metrics in either format, the checkpoints).
inline constexpr const char* kRunFiles[] = {
    "config.json",  "iterations.csv",         "iterations.jsonl",      "epochs.csv",
    "epochs.jsonl", "checkpoint.safetensors", "epoch_end.safetensors", ".sparsetrain.lock"};

// Rank 0's claim on --out for a run's lifetime: an exclusive lock (flock) on the folder
// itself, which a second run into the same folder finds taken and is refused by; removing
// files inside does not release it. The pid in <out>/.sparsetrain.lock is for the second
// run's message. The kernel drops the lock when the process ends, also on kill -9.
class OutDirClaim {
 public:
  OutDirClaim() = default;
  explicit OutDirClaim(const std::string& out);
  ~OutDirClaim();
  OutDirClaim(OutDirClaim&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OutDirClaim& operator=(OutDirClaim&& o) noexcept;
  OutDirClaim(const OutDirClaim&) = delete;
  OutDirClaim& operator=(const OutDirClaim&) = delete;

 private:
  int fd_ = -1;
};

// Whether --resume continues the run in --out: its checkpoint, symlinks resolved, lies in
// that folder.
bool resumes_in_place(const TrainConfig& c);

// Rank 0, before the folder is made: what --out points at can hold a run.
void check_run_paths(const TrainConfig& c);

// Rank 0, holding the claim: checks what --trace points at, then decides what
// happens to a run already in --out. A second run there would truncate its metrics and
// replace its checkpoint: that takes --resume of that run's checkpoint (continue it) or
// --overwrite (replace it). A resume of another folder's checkpoint would append to this
// run's metrics, so it is refused too; an --overwrite that would delete the checkpoint
// being resumed is refused.
void prepare_out_dir(const TrainConfig& c);

class Communicator;
// Before a task is built: checks every flag, that all ranks got the same ones, claims
// --out (rank 0) and checks that it holds no other run (or --resume of its own
// checkpoint / --overwrite says what to do with it). Keep the claim until the run ends.
[[nodiscard]] OutDirClaim prepare_run(const TrainConfig& c, Communicator& comm);

}  // namespace st
