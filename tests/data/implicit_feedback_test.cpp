// NCF's implicit feedback: the MovieLens ratings.csv reader (id mapping, leave-one-out by
// latest timestamp, negatives never rated, one-line errors naming file:line), the
// synthetic set and each epoch's training examples.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "data/implicit_feedback.h"
#include "data_files.h"
#include "tests/error_text.h"

namespace st::test {
namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Users 7 and 42 (dense 0 and 1), movies 10, 20, 30, 5 (dense 1, 2, 3, 0) and 99 (4).
// User 7's latest rating is movie 20 (time 500) although it is not the last line; user
// 42's two ratings at time 300 tie, and the later line (movie 5) is held out.
const char* kRatings =
    "userId,movieId,rating,timestamp\r\n"
    "7,10,4.0,100\r\n"
    "42,30,3.5,300\r\n"
    "7,20,5.0,500\r\n"
    "7,30,1.0,200\r\n"
    "42,5,2.0,300\r\n"
    "42,99,4.5,50\r\n";

TEST(ImplicitFeedback, MovieLensIdsAndLeaveOneOut) {
  TempDir dir;
  write_text(dir / "ratings.csv", kRatings);
  const ImplicitFeedback d = read_movielens_ratings((dir / "ratings.csv").string(), 3);
  EXPECT_EQ(d.users, 2);
  EXPECT_EQ(d.items, 5);
  EXPECT_EQ(d.test_items, (std::vector<int32_t>{2, 0}));
  // Training positives in user order, each user's by time: 7: 10 (100), 30 (200); 42: 99 (50), 30
  // (300).
  EXPECT_EQ(d.train_users, (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(d.train_items, (std::vector<int32_t>{1, 3, 4, 3}));
  EXPECT_EQ(d.rated[0], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(d.rated[1], (std::vector<int32_t>{0, 3, 4}));
  ASSERT_EQ(d.test_negatives.size(), static_cast<size_t>(2 * kEvalNegatives));
  for (int64_t u = 0; u < 2; ++u)
    for (int k = 0; k < kEvalNegatives; ++k) {
      const int32_t item = d.test_negatives[static_cast<size_t>(u * kEvalNegatives + k)];
      ASSERT_TRUE(item >= 0 && item < d.items) << item;
      ASSERT_FALSE(d.is_rated(u, item)) << "user " << u << " negative " << item;
    }
  // User 0 has two unrated items (0 and 4); 99 draws reach both.
  const std::set<int32_t> seen(d.test_negatives.begin(), d.test_negatives.begin() + kEvalNegatives);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 4}));
  // The same seed draws the same negatives; another seed others.
  EXPECT_EQ(read_movielens_ratings((dir / "ratings.csv").string(), 3).test_negatives,
            d.test_negatives);
  EXPECT_NE(read_movielens_ratings((dir / "ratings.csv").string(), 4).test_negatives,
            d.test_negatives);
}

TEST(ImplicitFeedback, MalformedRatingsNameFileAndLine) {
  TempDir dir;
  const std::string path = (dir / "ratings.csv").string();
  write_text(path, "userId,movieId,rating,timestamp\n1,2,3.0,4\n1,x,3.0,5\n");
  std::string e = error_of([&] { read_movielens_ratings(path, 0); });
  EXPECT_NE(e.find(path + ":3: expected userId,movieId,rating,timestamp"), std::string::npos) << e;
  EXPECT_NE(e.find("'1,x,3.0,5'"), std::string::npos) << e;
  write_text(path, "userId,movieId,rating,timestamp\n1,2,3.0\n");
  e = error_of([&] { read_movielens_ratings(path, 0); });
  EXPECT_NE(e.find(path + ":2:"), std::string::npos) << e;
  write_text(path, "user,movie\n1,2,3.0,4\n");
  e = error_of([&] { read_movielens_ratings(path, 0); });
  EXPECT_NE(e.find(path + ":1: expected the header"), std::string::npos) << e;
  e = error_of([&] { read_movielens_ratings((dir / "missing.csv").string(), 0); });
  EXPECT_NE(e.find("missing.csv: cannot open"), std::string::npos) << e;
  // A user who rated every item leaves nothing to draw negatives from.
  write_text(path, "userId,movieId,rating,timestamp\n1,2,3.0,4\n1,3,3.0,5\n");
  e = error_of([&] { read_movielens_ratings(path, 0); });
  EXPECT_NE(e.find("rated every item"), std::string::npos) << e;
}

TEST(ImplicitFeedback, TrainingExamplesHoldEveryPositiveAndUnratedNegatives) {
  SyntheticNcfOptions o;
  o.users = 50;
  o.items = 80;
  o.clusters = 4;
  o.per_user = 6;
  o.seed = 5;
  const ImplicitFeedback d = synthetic_ncf(o);
  ASSERT_EQ(d.train_users.size(), static_cast<size_t>(50 * 5));
  const NcfExamples e = training_examples(d, 4, 9, 0);
  ASSERT_EQ(e.size(), 50 * 5 * 5);
  std::multiset<std::pair<int32_t, int32_t>> positives, want;
  int64_t negatives = 0;
  for (int64_t k = 0; k < e.size(); ++k) {
    const size_t i = static_cast<size_t>(k);
    if (e.labels[i] == 1.0f) {
      positives.insert({e.users[i], e.items[i]});
    } else {
      ASSERT_EQ(e.labels[i], 0.0f);
      ASSERT_FALSE(d.is_rated(e.users[i], e.items[i]));
      ++negatives;
    }
  }
  for (size_t k = 0; k < d.train_users.size(); ++k)
    want.insert({d.train_users[k], d.train_items[k]});
  EXPECT_EQ(positives, want);
  EXPECT_EQ(negatives, 50 * 5 * 4);
  // Deterministic per (seed, epoch); a new epoch draws new negatives and a new order.
  EXPECT_EQ(training_examples(d, 4, 9, 0).items, e.items);
  EXPECT_NE(training_examples(d, 4, 9, 1).items, e.items);
}

// Most of a synthetic user's ratings are in the group it prefers.
TEST(ImplicitFeedback, SyntheticUsersPreferTheirGroup) {
  SyntheticNcfOptions o;
  o.seed = 1;
  const ImplicitFeedback d = synthetic_ncf(o);
  EXPECT_EQ(d.users, 1000);
  EXPECT_EQ(d.items, 400);
  int64_t in_group = 0, total = 0;
  for (int64_t u = 0; u < d.users; ++u)
    for (int32_t item : d.rated[static_cast<size_t>(u)]) {
      in_group += item % o.clusters == u % o.clusters ? 1 : 0;
      ++total;
    }
  EXPECT_EQ(total, 1000 * 20);
  EXPECT_GT(static_cast<double>(in_group) / static_cast<double>(total), 0.85);
  EXPECT_EQ(synthetic_ncf(o).train_items, d.train_items);
}

}  // namespace
}  // namespace st::test
