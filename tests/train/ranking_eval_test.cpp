// HR@10 and NDCG@10 (train/ranking_eval.h) on known rankings: a model whose logit is a
// fixed score per item, so every user's rank is known in advance.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/local_communicator.h"
#include "train/ranking_eval.h"

namespace st::test {
namespace {

// Logit of (user, item) = item's score; the input is int32 [2, M] as NCF takes it.
class ScoreByItem : public Layer {
 public:
  std::string describe() const override { return "ScoreByItem"; }

 protected:
  Tensor forward_cpu(const Tensor& x) override {
    const int64_t m = x.dim(1);
    Tensor y = Tensor::empty(Shape{m, 1});
    for (int64_t i = 0; i < m; ++i) y.f32()[i] = static_cast<float>(x.data<int32_t>()[m + i]);
    return y;
  }
  Tensor backward_cpu(const Tensor&) override { return Tensor(); }
};

TEST(RankingEval, RankCountsHigherAndTiedScores) {
  const float scores[] = {0.5f, 0.1f, 0.9f, 0.5f, -3.0f};
  EXPECT_EQ(rank_of_first(scores, 5), 2);  // 0.9 ahead, and the tie at 0.5
  EXPECT_EQ(rank_of_first(scores, 2), 0);
  const float constant[] = {1, 1, 1, 1};
  EXPECT_EQ(rank_of_first(constant, 4), 3);  // a constant model ranks its item last
}

// User 0's item outranks all 99 negatives (rank 0), user 1's has two negatives above it
// and one tied (rank 3), user 2's has ten above it (rank 10, no hit).
TEST(RankingEval, HitRateAndNdcgAtTen) {
  ImplicitFeedback d;
  d.users = 3;
  d.items = 300;
  d.test_items = {150, 50, 60};
  d.rated.assign(3, {});
  for (int64_t u = 0; u < 3; ++u)
    for (int k = 0; k < kEvalNegatives; ++k) {
      int32_t item = k % 40;  // below every held-out item
      if (u == 1 && k < 3) item = k == 2 ? 50 : 200 + k;
      if (u == 2 && k < 10) item = 200 + k;
      d.test_negatives.push_back(item);
    }
  LocalCommunicator comm;
  ScoreByItem model;
  for (int64_t per_batch : {1, 2, 3}) {
    const RankingResult r = evaluate_ranking(model, d, Device::cpu(), per_batch, 0, comm);
    EXPECT_EQ(r.users, 3);
    EXPECT_NEAR(r.hr, 2.0 / 3.0, 1e-12) << per_batch;
    EXPECT_NEAR(r.ndcg, (1.0 + 1.0 / std::log2(5.0)) / 3.0, 1e-12) << per_batch;
    EXPECT_GT(r.loss, 0);
  }
  // --eval-batches 1 with one user a batch: user 0 alone.
  const RankingResult first = evaluate_ranking(model, d, Device::cpu(), 1, 1, comm);
  EXPECT_EQ(first.users, 1);
  EXPECT_EQ(first.hr, 1.0);
  EXPECT_EQ(first.ndcg, 1.0);
}

}  // namespace
}  // namespace st::test
