// The re-split of a sparsified checkpoint for another number of ranks
// (sparsify/resplit.h): which old residuals each new rank gets, that their sum over the
// ranks is kept, that 2 -> 4 -> 2 gives every residual back unchanged, and the refusals.
#include "sparsify/resplit.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "sparsify/registry.h"

namespace st {
namespace {

std::vector<float> random_vector(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// `world` old ranks of one method, residuals for buckets 0 (n0) and 1 (n1), one rule.
std::vector<HookState> old_states(int world, size_t n0, size_t n1) {
  std::vector<HookState> old(static_cast<size_t>(world));
  for (int q = 0; q < world; ++q) {
    HookState& h = old[static_cast<size_t>(q)];
    h.method = "micro";
    h.residuals[0] = random_vector(n0, 10u + static_cast<unsigned>(q));
    h.residuals[1] = random_vector(n1, 100u + static_cast<unsigned>(q));
    h.rule = {1, 2, 3, 4};
  }
  return old;
}

std::vector<HookState> resplit_all(const std::vector<HookState>& old, int world) {
  std::vector<HookState> out;
  for (int r = 0; r < world; ++r) out.push_back(resplit_hook_state(old, world, r, {}, "ckpt"));
  return out;
}

// The sum over ranks of one bucket's residual, in double (empty residuals are zeros).
std::vector<double> rank_sum(const std::vector<HookState>& states, int bucket, size_t n) {
  std::vector<double> sum(n, 0.0);
  for (const HookState& h : states) {
    const std::vector<float>& r = h.residuals.at(bucket);
    if (r.empty()) continue;
    for (size_t i = 0; i < n; ++i) sum[i] += r[i];
  }
  return sum;
}

TEST(Resplit, GrowingKeepsEachOldResidualAndStartsNewRanksEmpty) {
  const auto old = old_states(2, 50, 7);
  const auto grown = resplit_all(old, 4);
  for (int r = 0; r < 4; ++r)
    for (int b : {0, 1}) {
      const std::vector<float>& got = grown[static_cast<size_t>(r)].residuals.at(b);
      if (r < 2)
        EXPECT_EQ(got, old[static_cast<size_t>(r)].residuals.at(b)) << "rank " << r;
      else
        EXPECT_TRUE(got.empty()) << "rank " << r << " bucket " << b;
    }
  EXPECT_EQ(grown[3].rule, old[0].rule);
  EXPECT_EQ(grown[3].method, "micro");
}

TEST(Resplit, ShrinkingSumsTheOldRanksOfEachNewRank) {
  const auto old = old_states(4, 33, 5);
  const auto shrunk = resplit_all(old, 2);
  for (int r = 0; r < 2; ++r) {
    const std::vector<float>& got = shrunk[static_cast<size_t>(r)].residuals.at(0);
    const std::vector<float>& a = old[static_cast<size_t>(r)].residuals.at(0);
    const std::vector<float>& b = old[static_cast<size_t>(r + 2)].residuals.at(0);
    ASSERT_EQ(got.size(), a.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], a[i] + b[i]);
  }
  // The error feedback owed to the model, the sum over the ranks, is kept.
  for (int b : {0, 1}) {
    const size_t n = old[0].residuals.at(b).size();
    const auto before = rank_sum(old, b, n), after = rank_sum(shrunk, b, n);
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(after[i], before[i], 1e-6);
  }
}

TEST(Resplit, UnevenShrinkGivesTheFirstRanksMore) {
  const auto old = old_states(3, 9, 4);
  const auto shrunk = resplit_all(old, 2);
  const std::vector<float>& r0 = shrunk[0].residuals.at(1);
  for (size_t i = 0; i < r0.size(); ++i)
    EXPECT_EQ(r0[i], old[0].residuals.at(1)[i] + old[2].residuals.at(1)[i]);
  EXPECT_EQ(shrunk[1].residuals.at(1), old[1].residuals.at(1));
}

TEST(Resplit, TwoToFourToTwoGivesEveryResidualBack) {
  const auto old = old_states(2, 64, 3);
  const auto back = resplit_all(resplit_all(old, 4), 2);
  for (int r = 0; r < 2; ++r)
    for (int b : {0, 1})
      EXPECT_EQ(back[static_cast<size_t>(r)].residuals.at(b),
                old[static_cast<size_t>(r)].residuals.at(b));
}

TEST(Resplit, RanksWithoutAResidualCountAsZeros) {
  auto old = old_states(4, 6, 2);
  old[0].residuals[0].clear();  // bucket 0 not exchanged yet on old rank 0
  old[2].residuals.erase(1);    // nor bucket 1 on old rank 2
  const auto shrunk = resplit_all(old, 2);
  EXPECT_EQ(shrunk[0].residuals.at(0), old[2].residuals.at(0));
  EXPECT_EQ(shrunk[0].residuals.at(1), old[0].residuals.at(1));
}

TEST(Resplit, RefusesPerRankRuleStateOnceItHasStarted) {
  auto old = old_states(2, 4, 4);
  for (HookState& h : old) h.method = "vgc";
  const std::vector<uint8_t> fresh = {9};
  const std::string line = resplit_refusal(old, 4, fresh);
  EXPECT_NE(line.find("--sparsifier vgc keeps a variance accumulator"), std::string::npos) << line;
  EXPECT_NE(line.find("resume it on 2 ranks, not 4"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  try {
    resplit_hook_state(old, 4, 0, fresh, "run/checkpoint.safetensors");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run/checkpoint.safetensors: --sparsifier vgc"),
              std::string::npos)
        << e.what();
  }
  // Before its first selection the state is the fresh one on every rank: nothing to split.
  for (HookState& h : old) h.rule = fresh;
  EXPECT_EQ(resplit_refusal(old, 4, fresh), "");
}

// Which methods keep per-rank state is their registry row's per_rank_state, and the
// refusal quotes it; a method this program does not know is refused too.
TEST(Resplit, PerRankStateComesFromTheRegistryRow) {
  auto old = old_states(2, 4, 4);
  int per_rank = 0;
  for (const SparsifierInfo& row : sparsifiers()) {
    for (HookState& h : old) h.method = row.name;
    const std::string line = resplit_refusal(old, 4, {9});
    SCOPED_TRACE(row.name + ": " + line);
    if (row.per_rank_state.empty()) {
      EXPECT_EQ(line, "");
    } else {
      ++per_rank;
      EXPECT_NE(line.find("--sparsifier " + row.name + " keeps " + row.per_rank_state +
                          ", which cannot be re-split"),
                std::string::npos);
    }
  }
  EXPECT_EQ(per_rank, 3);  // vgc, sage, dgc
  for (HookState& h : old) h.method = "no-such-method";
  EXPECT_NE(resplit_refusal(old, 4, {})
                .find("--sparsifier no-such-method, which this program does not know"),
            std::string::npos);
}

TEST(Resplit, RefusesRuleStateThatDiffersBetweenRanks) {
  auto old = old_states(2, 4, 4);
  old[1].rule = {1, 2, 3, 5};
  const std::string line = resplit_refusal(old, 3, {});
  EXPECT_NE(line.find("differs between the checkpoint's ranks"), std::string::npos) << line;
  EXPECT_NE(line.find("resume it on 2 ranks, not 3"), std::string::npos) << line;
}

TEST(Resplit, RefusesMixedMethodsAndMismatchedResiduals) {
  auto old = old_states(2, 4, 4);
  old[1].method = "topk";
  EXPECT_NE(resplit_refusal(old, 4, {}).find("micro and topk"), std::string::npos);
  old = old_states(2, 4, 4);
  old[1].residuals[0].push_back(1.0f);
  try {
    resplit_hook_state(old, 1, 0, {}, "ckpt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("residual of bucket 0 has 5 elements on rank 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(Resplit, HookStateStreamRoundTrips) {
  const HookState h = old_states(1, 5, 3)[0];
  const std::vector<uint8_t> bytes = write_hook_state(h);
  StateReader in(bytes.data(), bytes.size(), "stream");
  const HookState back = read_hook_state(in);
  EXPECT_TRUE(in.done());
  EXPECT_EQ(back.method, h.method);
  EXPECT_EQ(back.residuals, h.residuals);
  EXPECT_EQ(back.rule, h.rule);
}

}  // namespace
}  // namespace st
