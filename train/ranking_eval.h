// Evaluation of a ranking task (NCF, He et al. 2017 sec. 4.1): each user's held-out item is
// ranked among itself and kEvalNegatives items that user never rated; HR@k counts the users
// whose item lands in the top k, NDCG@k credits a hit at 0-based rank r with
// 1 / log2(r + 2). Users are sharded over the ranks (user u on rank u % P) and the sums
// added, so any number of ranks gives the same figures as one.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "data/implicit_feedback.h"
#include "layers/layer.h"

namespace st {

class Communicator;

inline constexpr int kRankingTopK = 10;

struct RankingResult {
  double hr = 0;    // HR@10, a fraction of the users
  double ndcg = 0;  // NDCG@10
  double loss = 0;  // mean binary cross-entropy over the scored (user, item) pairs
  int64_t users = 0;
};

// The 0-based rank of scores[0] among scores[0..n): how many of the others score at least
// as high (a tie counts against the held-out item, so a constant model scores no hits).
int64_t rank_of_first(const float* scores, int64_t n);

// Scores every user's 1 + kEvalNegatives candidates with `model` (logits [M, 1] for
// int32 [2, M] (user, item) input) on `device`, `users_per_batch` users a forward;
// `max_batches` > 0 caps this rank's forwards. Collective.
RankingResult evaluate_ranking(Layer& model, const ImplicitFeedback& data, Device device,
                               int64_t users_per_batch, int64_t max_batches, Communicator& comm);

}  // namespace st
