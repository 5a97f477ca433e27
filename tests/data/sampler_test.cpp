#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/sampler.h"

namespace st::test {
namespace {

TEST(DistributedSampler, RanksCoverEveryIndexOncePerEpoch) {
  const int64_t n = 1000;
  for (int world : {1, 2, 4, 8}) {
    for (int64_t epoch : {0, 1, 5}) {
      std::vector<int64_t> all;
      for (int r = 0; r < world; ++r) {
        DistributedSampler s(n, {.rank = r, .world_size = world, .seed = 3});
        std::vector<int64_t> mine = s.indices(epoch);
        EXPECT_EQ(static_cast<int64_t>(mine.size()), n / world);
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::sort(all.begin(), all.end());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(all[i], i) << "world " << world;
    }
  }
}

TEST(DistributedSampler, SameShuffleOnAllRanks) {
  // Rank r's k-th index is position r + k * world of the one global permutation.
  const int64_t n = 103;
  const int world = 4;
  std::vector<int64_t> global = DistributedSampler(n, {.seed = 9}).indices(2);
  for (int r = 0; r < world; ++r) {
    std::vector<int64_t> mine =
        DistributedSampler(n, {.rank = r, .world_size = world, .seed = 9}).indices(2);
    ASSERT_EQ(mine.size(), 26u);
    for (size_t k = 0; k < mine.size(); ++k) EXPECT_EQ(mine[k], global[(r + k * world) % n]);
  }
}

TEST(DistributedSampler, PaddingRepeatsTheHeadLikePyTorch) {
  const int64_t n = 10;
  const int world = 4;  // 3 per rank, 12 in all: the first 2 of the permutation repeat
  std::vector<int64_t> global = DistributedSampler(n, {.seed = 1}).indices(0);
  std::map<int64_t, int> seen;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, {.rank = r, .world_size = world, .seed = 1});
    EXPECT_EQ(s.num_samples(), 3);
    EXPECT_EQ(s.total_size(), 12);
    for (int64_t i : s.indices(0)) seen[i]++;
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen[global[0]], 2);
  EXPECT_EQ(seen[global[1]], 2);
}

// The padding is the tail of each rank's list: real_samples() of every rank add up to
// the dataset, each rank's first real_samples() indices are all distinct over ranks.
TEST(DistributedSampler, RealSamplesLeaveThePaddingOut) {
  for (const auto& [n, world] :
       std::vector<std::pair<int64_t, int>>{{10, 4}, {51, 2}, {3, 8}, {8, 4}}) {
    std::map<int64_t, int> seen;
    int64_t total = 0;
    for (int r = 0; r < world; ++r) {
      DistributedSampler s(n, {.rank = r, .world_size = world, .seed = 1});
      const std::vector<int64_t> mine = s.indices(0);
      total += s.real_samples();
      for (int64_t i = 0; i < s.real_samples(); ++i) seen[mine[static_cast<size_t>(i)]]++;
    }
    EXPECT_EQ(total, n) << n << " over " << world;
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n) << n << " over " << world;
  }
  EXPECT_EQ(DistributedSampler(3, {.rank = 5, .world_size = 8}).real_samples(), 0);
  EXPECT_EQ(DistributedSampler(10, {.rank = 3, .world_size = 4, .drop_last = true}).real_samples(),
            2);
}

TEST(DistributedSampler, DropLastCutsTheTail) {
  const int64_t n = 10;
  std::map<int64_t, int> seen;
  for (int r = 0; r < 4; ++r) {
    DistributedSampler s(n, {.rank = r, .world_size = 4, .drop_last = true});
    EXPECT_EQ(s.num_samples(), 2);
    for (int64_t i : s.indices(3)) seen[i]++;
  }
  EXPECT_EQ(seen.size(), 8u);
  for (auto [i, count] : seen) EXPECT_EQ(count, 1) << i;
}

TEST(DistributedSampler, EpochsShuffleDifferentlyAndReproducibly) {
  DistributedSampler s(500, {.seed = 7});
  EXPECT_EQ(s.indices(1), s.indices(1));
  EXPECT_NE(s.indices(1), s.indices(2));
  EXPECT_NE(s.indices(1), DistributedSampler(500, {.seed = 8}).indices(1));
  std::vector<int64_t> ordered = DistributedSampler(5, {.shuffle = false}).indices(4);
  EXPECT_EQ(ordered, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DistributedSampler, BadRankThrows) {
  EXPECT_THROW(DistributedSampler(10, {.rank = 2, .world_size = 2}), Error);
  EXPECT_THROW(DistributedSampler(0, {}), Error);
  EXPECT_THROW(DistributedSampler(3, {.world_size = 4, .drop_last = true}), Error);
}

}  // namespace
}  // namespace st::test
