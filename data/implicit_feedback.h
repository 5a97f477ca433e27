// Implicit feedback for NCF (He et al. 2017; the MLPerf recommendation reference): every
// rating is a positive (user, item) pair, each user's latest rating is held out as the
// test positive (leave-one-out) and ranked against 99 sampled items that user never
// rated; training pairs each positive with `negatives` unrated items drawn anew every
// epoch. Two sources: MovieLens ratings.csv (read_movielens_ratings) and a seeded
// synthetic set with a structure a model can learn (synthetic_ncf). docs/DATA.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace st {

// The --dataset values of --arch ncf: "synthetic-ncf" (synthetic_ncf, the default) and
// "movielens" (read_movielens_ratings of <--data-dir>/ratings.csv).
inline const std::vector<std::string>& ncf_dataset_names() {
  static const std::vector<std::string> names = {"synthetic-ncf", "movielens"};
  return names;
}

// Items ranked with each user's test positive (He et al. 2017 sec. 4.1); HR@10 of a random
// ranking is 10 / (1 + kEvalNegatives).
inline constexpr int kEvalNegatives = 99;

struct ImplicitFeedback {
  std::string name;
  int64_t users = 0, items = 0;
  // Training positives: every rating but each user's held-out one, in user order.
  std::vector<int32_t> train_users, train_items;
  // Per user: the held-out positive, then kEvalNegatives unrated items ([users x 99]).
  std::vector<int32_t> test_items, test_negatives;
  // Per user: every item rated (training and test), sorted; what negatives avoid.
  std::vector<std::vector<int32_t>> rated;

  bool is_rated(int64_t user, int32_t item) const;
};

// Reads MovieLens `path` (ratings.csv: the header userId,movieId,rating,timestamp, then one
// rating a line). User and movie ids become dense indices in increasing id order. The
// test positive is the rating with the latest timestamp (on a tie, the later line); the
// evaluation negatives come from `seed`. A missing file, a bad header or a malformed line
// is an st::Error naming path:line.
ImplicitFeedback read_movielens_ratings(const std::string& path, uint64_t seed);

// A learnable set: items fall into `clusters` groups (item i in group i % clusters), user u
// prefers group u % clusters, and each of a user's `per_user` distinct ratings is an item of
// that group with probability `in_group`, else any item. A model that learns the groups
// ranks a test positive among the ~1/clusters of the negatives that share its group, far
// above the random HR@10 of 0.10.
struct SyntheticNcfOptions {
  int64_t users = 1000;
  int64_t items = 400;
  int64_t clusters = 8;
  int64_t per_user = 20;
  double in_group = 0.9;
  uint64_t seed = 0;
};
ImplicitFeedback synthetic_ncf(const SyntheticNcfOptions& options);

// One epoch's training examples: every training positive (label 1) and `negatives`
// unrated items per positive (label 0), shuffled. A function of (data, negatives, seed,
// epoch) only, so every rank draws the same list and takes its own shard of it.
struct NcfExamples {
  std::vector<int32_t> users, items;
  std::vector<float> labels;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};
NcfExamples training_examples(const ImplicitFeedback& data, int negatives, uint64_t seed,
                              int64_t epoch);

}  // namespace st
