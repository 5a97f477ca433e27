#include "train/ranking_eval.h"

#include <cmath>
#include <vector>

#include "comm/communicator.h"
#include "layers/bce_with_logits.h"

namespace st {

namespace {

constexpr int64_t kCandidates = 1 + kEvalNegatives;

// This rank's users from `first` on, at most `count`: ids [2, M] and labels [M] on the host.
struct CandidateBatch {
  std::vector<int32_t> ids;  // users, then items
  std::vector<float> labels;
  int64_t users = 0;
};

CandidateBatch candidates(const ImplicitFeedback& d, int64_t first, int64_t count, int64_t stride) {
  CandidateBatch b;
  std::vector<int32_t> users, items;
  for (int64_t u = first; u < d.users && b.users < count; u += stride, ++b.users) {
    for (int64_t k = 0; k < kCandidates; ++k) {
      users.push_back(static_cast<int32_t>(u));
      items.push_back(k == 0 ? d.test_items[static_cast<size_t>(u)]
                             : d.test_negatives[static_cast<size_t>(u * kEvalNegatives + k - 1)]);
      b.labels.push_back(k == 0 ? 1.0f : 0.0f);
    }
  }
  b.ids = users;
  b.ids.insert(b.ids.end(), items.begin(), items.end());
  return b;
}

}  // namespace

int64_t rank_of_first(const float* scores, int64_t n) {
  int64_t ahead = 0;
  for (int64_t k = 1; k < n; ++k) ahead += scores[k] >= scores[0] ? 1 : 0;
  return ahead;
}

RankingResult evaluate_ranking(Layer& model, const ImplicitFeedback& d, Device device,
                               int64_t users_per_batch, int64_t max_batches, Communicator& comm) {
  ST_CHECK(users_per_batch > 0, "evaluate_ranking: users per batch must be positive");
  model.set_training(false);
  double hits = 0, gain = 0, loss_sum = 0, pairs = 0, users = 0;
  BceWithLogits bce;
  int64_t batches = 0;
  const int64_t stride = comm.size();
  for (int64_t u = comm.rank(); u < d.users; u += stride * users_per_batch) {
    if (max_batches > 0 && batches++ >= max_batches) break;
    const CandidateBatch b = candidates(d, u, users_per_batch, stride);
    const int64_t m = b.users * kCandidates;
    const Tensor ids = Tensor::from_vector_i32(b.ids, Shape{2, m}).to(device);
    const Tensor logits = model.forward(ids);
    loss_sum += static_cast<double>(bce.forward(logits, Tensor::from_vector(b.labels, Shape{m}))) *
                static_cast<double>(m);
    pairs += static_cast<double>(m);
    const Tensor scores = logits.to(Device::cpu());
    for (int64_t k = 0; k < b.users; ++k) {
      const int64_t r = rank_of_first(scores.f32() + k * kCandidates, kCandidates);
      if (r < kRankingTopK) {
        hits += 1;
        gain += 1.0 / std::log2(static_cast<double>(r) + 2.0);
      }
    }
    users += static_cast<double>(b.users);
  }
  model.set_training(true);
  RankingResult r;
  users = comm.allreduce_scalar(users);
  hits = comm.allreduce_scalar(hits);
  gain = comm.allreduce_scalar(gain);
  loss_sum = comm.allreduce_scalar(loss_sum);
  pairs = comm.allreduce_scalar(pairs);
  ST_CHECK(users > 0, "evaluation: no test users");
  r.users = static_cast<int64_t>(users + 0.5);
  r.hr = hits / users;
  r.ndcg = gain / users;
  r.loss = loss_sum / pairs;
  return r;
}

}  // namespace st
