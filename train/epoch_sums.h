// The running sums of an epoch on this rank (loss x items, items, correct items) behind
// the progress line and the epoch row, and their part of a mid-epoch checkpoint, so a
// resumed epoch reports what the uninterrupted one would have.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace st {

class Communicator;

class EpochSums {
 public:
  using Sums = std::array<double, 3>;  // loss x items, items, correct items
  // Adds a step of `items` items with mean loss `loss`.
  void add(float loss, double items, int64_t correct) {
    loss_sum_ += static_cast<double>(loss) * items;
    items_ += items;
    correct_ += correct;
  }
  // Starts an epoch: from zero, or (`resumed`) from the restored checkpoint's sums.
  void begin_epoch(bool resumed);
  double loss_sum() const { return loss_sum_; }
  double items() const { return items_; }
  int64_t correct() const { return correct_; }

  // Collective. Into a mid-epoch checkpoint's metadata: the sums over all ranks (older
  // readers use them) and each rank's own, which a resume on as many ranks restores rank
  // by rank, so the epoch's reduction adds the same numbers in the same order as an
  // uninterrupted run.
  void save(std::map<std::string, std::string>& meta, Communicator& comm) const;
  // On --resume of a mid-epoch checkpoint (`path`, saved by as many ranks): this rank's
  // sums (rank 0 takes the total from a checkpoint without per-rank sums). Damaged sums,
  // rows of another number of ranks, or rows that do not add up to the total are refused
  // in one line; a checkpoint with no sums at all resumes with a note that the epoch's
  // row counts only the steps after the resume.
  void restore(const std::map<std::string, std::string>& saved, const Communicator& comm,
               const std::string& path);

 private:
  double loss_sum_ = 0, items_ = 0;
  int64_t correct_ = 0;
  double restored_[3] = {0, 0, 0};
};

}  // namespace st
