#include "train/epoch_sums.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"

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

// "loss_sum items correct": a loss sum and an item count that are finite and not
// negative, and a whole count of correct items no larger than the items.
EpochSums::Sums parse(const std::string& text, const std::string& path, const char* key) {
  EpochSums::Sums v{};
  std::istringstream in(text);
  std::string extra;
  const bool read = static_cast<bool>(in >> v[0] >> v[1] >> v[2]) && !(in >> extra);
  const bool sane = read && std::isfinite(v[0]) && std::isfinite(v[1]) && v[0] >= 0 && v[1] >= 0 &&
                    v[2] >= 0 && v[2] <= v[1] && std::floor(v[2]) == v[2];
  ST_CHECK(sane, path, ": checkpoint metadata '", key, "' holds '", text,
           "', not 'loss_sum items correct' of an epoch so far");
  return v;
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

void EpochSums::restore(const std::map<std::string, std::string>& saved, const Communicator& comm,
                        const std::string& path) {
  const std::string* by_rank = find(saved, kEpochSumsByRank);
  const std::string* total = find(saved, kEpochSums);
  if (!by_rank && !total) {
    if (comm.rank() == 0)
      std::fprintf(stderr,
                   "note: %s holds no epoch sums (metadata '%s'): the resumed epoch's row "
                   "counts only the steps after the resume\n",
                   path.c_str(), kEpochSums);
    return;
  }
  const Sums sum = total ? parse(*total, path, kEpochSums) : Sums{};
  if (!by_rank) {
    if (comm.rank() == 0) std::copy(sum.begin(), sum.end(), restored_);
    return;
  }
  std::vector<std::string> rows;
  std::istringstream in(*by_rank);
  for (std::string row; std::getline(in, row, ';');) rows.push_back(row);
  ST_CHECK(static_cast<int>(rows.size()) == comm.size(), path, ": checkpoint metadata '",
           kEpochSumsByRank, "' holds ", rows.size(), " rank(s)' sums, not the ", comm.size(),
           " of this run");
  Sums added{};
  for (int r = 0; r < comm.size(); ++r) {
    const Sums mine = parse(rows[static_cast<size_t>(r)], path, kEpochSumsByRank);
    for (int i = 0; i < 3; ++i) added[i] += mine[i];
    if (r == comm.rank()) std::copy(mine.begin(), mine.end(), restored_);
  }
  // The total went through a collective in single precision: it agrees to float rounding.
  for (int i = 0; total && i < 3; ++i)
    ST_CHECK(std::abs(added[i] - sum[i]) <= 1e-5 * std::max(1.0, std::abs(sum[i])), path,
             ": checkpoint metadata '", kEpochSumsByRank, "' adds up to another total than '",
             kEpochSums, "'");
}

}  // namespace st
