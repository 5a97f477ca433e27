#include "train/epoch_sums.h"

#include <cstdio>
#include <sstream>
#include <vector>

#include "comm/communicator.h"

namespace st {

namespace {

// Checkpoint metadata: "loss_sum items correct" of the epoch so far, over all ranks.
const char* const kEpochSums = "epoch_sums";
// The same, each rank's: "loss_sum items correct;..." in rank order.
const char* const kEpochSumsByRank = "epoch_sums_by_rank";

const std::string* find(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

}  // namespace

void EpochSums::begin_epoch(bool resumed) {
  loss_sum_ = resumed ? restored_[0] : 0.0;
  items_ = resumed ? restored_[1] : 0.0;
  correct_ = resumed ? static_cast<int64_t>(restored_[2]) : 0;
}

void EpochSums::save(std::map<std::string, std::string>& meta, Communicator& comm) const {
  double sums[3] = {loss_sum_, items_, static_cast<double>(correct_)};
  char text[80];
  std::snprintf(text, sizeof text, "%.17g %.17g %.17g", sums[0], sums[1], sums[2]);
  const std::vector<std::string> rows = comm.gather_bytes(text, 0);
  for (double& v : sums) v = comm.allreduce_scalar(v);
  std::snprintf(text, sizeof text, "%.17g %.17g %.17g", sums[0], sums[1], sums[2]);
  meta[kEpochSums] = text;
  std::string by_rank;
  for (const std::string& row : rows) by_rank += (by_rank.empty() ? "" : ";") + row;
  meta[kEpochSumsByRank] = by_rank;
}

void EpochSums::restore(const std::map<std::string, std::string>& saved, const Communicator& comm) {
  const std::string* by_rank = find(saved, kEpochSumsByRank);
  const std::string* total = find(saved, kEpochSums);
  std::string mine;
  if (by_rank) {
    std::istringstream rows(*by_rank);
    for (int r = 0; r <= comm.rank() && std::getline(rows, mine, ';');) ++r;
  } else if (total && comm.rank() == 0) {
    mine = *total;
  }
  std::istringstream in(mine);
  in >> restored_[0] >> restored_[1] >> restored_[2];
}

}  // namespace st
