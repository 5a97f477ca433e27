// ExDyna (Yoon & Oh, CCGrid 2024): the block grid, partitions disjoint and covering
// after any moves, the boundary sweep on crafted skewed loads (known boundaries,
// cascades, the minimum size), the mapping of per-rank counts to partitions, and (under
// mpirun) rank-identical boundaries and lower padding overhead than MiCRO on skewed
// gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "comm/communicator.h"
#include "core/rng.h"
#include "sparsify/exdyna.h"
#include "sparsify/host_select.h"
#include "sparsify/registry.h"
#include "sparsify/sparsify_hook.h"
#include "tests/comm/mpi_test_run.h"

namespace st::test {
namespace {

using Counts = std::vector<int64_t>;

part::BlockRule rule_with(int64_t blocks) {
  part::BlockRule r;
  r.blocks = blocks;
  return r;
}

TEST(ExDynaGrid, PaperBlocksAndSmallBuckets) {
  const part::BlockRule r;
  // ResNet-50's 25,557,032 gradients: b = floor(n/1024) = 24958 -> 24928 (multiple of 32).
  part::BlockGrid g = part::block_grid(25557032, 4, r);
  EXPECT_EQ(g.size, 24928);
  EXPECT_EQ(g.count, 1024);
  EXPECT_EQ(g.tail, 25557032 - 24928 * 1024);
  g = part::block_grid(32768, 4, r);  // the smallest bucket on the paper's grid
  EXPECT_EQ(g.size, 32);
  EXPECT_EQ(g.count, 1024);
  EXPECT_EQ(g.tail, 0);
  g = part::block_grid(32767, 4, r);  // below it: floor(n/32) blocks of 32
  EXPECT_EQ(g.size, 32);
  EXPECT_EQ(g.count, 1023);
  EXPECT_EQ(g.tail, 31);
  g = part::block_grid(6000, 4, r);
  EXPECT_EQ(g.count, 187);
  EXPECT_EQ(g.tail, 6000 - 187 * 32);
  g = part::block_grid(100, 4, r);  // 3 blocks for 4 ranks: element partitions
  EXPECT_EQ(g.count, 0);
  // --sp fill=1: whole blocks of the paper's size b; the tail is under one block.
  part::BlockRule fill = r;
  fill.fill = true;
  g = part::block_grid(25557032, 4, fill);
  EXPECT_EQ(g.size, 24928);
  EXPECT_EQ(g.count, 1025);
  EXPECT_EQ(g.tail, 25557032 - 24928 * 1025);
  g = part::block_grid(50280, 4, fill);  // paper grid: 1024 x 32 + a 17512 tail
  EXPECT_EQ(g.size, 32);
  EXPECT_EQ(g.count, 1571);
  EXPECT_EQ(g.tail, 8);
  g = part::block_grid(6000, 4, fill);  // small buckets as without fill
  EXPECT_EQ(g.count, 187);
  Counts c(3);
  part::initial_block_counts(part::block_grid(1 << 20, 3, r), 3, c.data());
  EXPECT_EQ(c[0], 342);
  EXPECT_EQ(c[1], 341);
  EXPECT_EQ(c[2], 341);
}

void expect_cover(const part::BlockGrid& g, const Counts& c, int64_t n, const std::string& what) {
  const int P = static_cast<int>(c.size());
  int64_t next = 0;
  for (int p = 0; p < P; ++p) {
    const part::Range r = part::block_partition(g, c.data(), P, p);
    ASSERT_EQ(r.begin, next) << what << ": gap or overlap before partition " << p;
    ASSERT_GE(r.size(), 0) << what;
    if (p < P - 1) {
      ASSERT_EQ(r.begin % g.size, 0) << what << ": partition " << p << " not block-aligned";
      ASSERT_EQ(r.size() % g.size, 0) << what;
    }
    next = r.end;
  }
  ASSERT_EQ(next, n) << what << ": partitions do not cover the bucket";
}

// Covering for many (n, P), also after many sweeps on random loads; no partition below
// the minimum.
TEST(ExDynaGrid, DisjointCoveringAfterMoves) {
  Rng rng(21);
  for (int64_t n : {32 * 4, 6000, 2500, 32767, 32768, 100003, 1 << 20, 25557032}) {
    for (int P : {1, 2, 3, 4, 8}) {
      for (int64_t blocks : {1024, 16, -1024}) {  // -1024: 1024 with --sp fill=1
        part::BlockRule r = rule_with(blocks < 0 ? -blocks : blocks);
        r.fill = blocks < 0;
        const part::BlockGrid g = part::block_grid(n, P, r);
        const std::string what = "n=" + std::to_string(n) + " P=" + std::to_string(P);
        if (g.count == 0) continue;
        Counts c(P);
        part::initial_block_counts(g, P, c.data());
        expect_cover(g, c, n, what);
        const double min_blocks = static_cast<double>(g.count) / (r.min_div * P);
        int moves = 0;
        for (int it = 0; it < 200; ++it) {
          Counts loads(P);
          int64_t sum = 0;
          for (auto& l : loads) sum += l = rng.below(1000) * (rng.uniform() < 0.3f ? 10 : 1);
          moves += part::balance_sweep(r, g, n, P, sum, loads.data(), c.data());
          expect_cover(g, c, n, what);
          for (int64_t v : c) ASSERT_GE(static_cast<double>(v), min_blocks) << what;
        }
        if (P > 1 && g.count >= 8 * P) {
          EXPECT_GT(moves, 0) << what;
        }
      }
    }
  }
}

// A crafted skew on 4 partitions of 4 blocks of 65536 (n = 2^20, --sp blocks=16):
// k_prev = 100000, k_acc = 25000, high = 26250, low = 23809.5, one block carries
// int(65536 * 100000 / 2^20) = 6250. Loads [40000, 20100, 21900, 18000]:
//   (0,1) 40000 high, 20100 low  -> move right: [3,5,4,4], loads [33750, 26350, ...]
//   (1,2) 26350 high (cascaded), 21900 low -> [3,4,5,4], loads [.., 20100, 28150, ..]
//   (2,3) 28150 high, 18000 low  -> [3,4,4,5]
TEST(ExDynaMoves, CraftedSkewCascadesLeftToRight) {
  const part::BlockRule r = rule_with(16);
  const int64_t n = 1 << 20;
  const part::BlockGrid g = part::block_grid(n, 4, r);
  ASSERT_EQ(g.size, 65536);
  Counts c(4), loads = {40000, 20100, 21900, 18000};
  part::initial_block_counts(g, 4, c.data());
  EXPECT_EQ(part::balance_sweep(r, g, n, 4, 100000, loads.data(), c.data()), 3);
  EXPECT_EQ(c, (Counts{3, 4, 4, 5}));
  EXPECT_EQ(loads, (Counts{33750, 20100, 21900, 24250}));
  EXPECT_EQ(part::block_partition(g, c.data(), 4, 2).begin, 7 * 65536);
  // The mirror image only moves at the last pair: the sweep goes left to right.
  c = {4, 4, 4, 4};
  loads = {18000, 21900, 20100, 40000};
  EXPECT_EQ(part::balance_sweep(r, g, n, 4, 100000, loads.data(), c.data()), 1);
  EXPECT_EQ(c, (Counts{4, 4, 5, 3}));
  // Balanced loads (within the 1.05 band) move nothing.
  c = {4, 4, 4, 4};
  loads = {26000, 24000, 25000, 25000};
  EXPECT_EQ(part::balance_sweep(r, g, n, 4, 100000, loads.data(), c.data()), 0);
  // A low partition between two high ones takes a block back from its right neighbour;
  // the tolerance is a --sp key, and at 1.5 the middle pair is inside the band.
  c = {4, 4, 4, 4};
  loads = {40000, 15000, 27000, 18000};
  EXPECT_EQ(part::balance_sweep(r, g, n, 4, 100000, loads.data(), c.data()), 2);
  EXPECT_EQ(c, (Counts{3, 6, 3, 4}));
  part::BlockRule loose = r;
  loose.tolerance = 1.5;
  c = {4, 4, 4, 4};
  loads = {40000, 15000, 27000, 18000};
  EXPECT_EQ(part::balance_sweep(loose, g, n, 4, 100000, loads.data(), c.data()), 1);
  EXPECT_EQ(c, (Counts{3, 5, 4, 4}));
}

// The paper's grid (1024 blocks, n = 2^20, b = 1024): one block carries
// int(1024 * 10000 / 2^20) = 9, too little to cascade; both outer pairs move.
TEST(ExDynaMoves, PaperGridOuterPairs) {
  const part::BlockRule r;
  const int64_t n = 1 << 20;
  const part::BlockGrid g = part::block_grid(n, 4, r);
  Counts c(4), loads = {4000, 1000, 1000, 4000};
  part::initial_block_counts(g, 4, c.data());
  EXPECT_EQ(c, (Counts{256, 256, 256, 256}));
  EXPECT_EQ(part::balance_sweep(r, g, n, 4, 10000, loads.data(), c.data()), 2);
  EXPECT_EQ(c, (Counts{255, 257, 257, 255}));
  EXPECT_EQ(loads, (Counts{3991, 1009, 1009, 3991}));
}

// --sp ref (default on) reproduces the reference code's arithmetic; ref=0 uses real values.
// k_prev = 10043 on 4 ranks: reference k_acc = int(2510.75) = 2510, high = 2635.5; real
// high = 1.05 * 2510.75 = 2636.29, so a load of 2636 is high only for the reference.
// k_prev = 4200000: k_acc = 1050000 either way; the real low edge is 1050000 / 1.05 =
// 1000000, the reference's 1050000 * 0.95238 = 999999, so 999999 is low only for ref=0.
TEST(ExDynaMoves, ReferenceArithmetic) {
  const part::BlockRule ref;
  part::BlockRule real = ref;
  real.reference = false;
  EXPECT_TRUE(ref.reference);
  const part::LoadBand b = part::load_band(ref, 10043, 4);
  EXPECT_EQ(b.k_acc, 2510.0);
  EXPECT_DOUBLE_EQ(b.high, 2635.5);
  EXPECT_DOUBLE_EQ(b.low, 2510 * 0.95238);
  EXPECT_DOUBLE_EQ(part::load_band(real, 10043, 4).low, 2510.75 / 1.05);
  const int64_t n = 1 << 20;
  const part::BlockGrid g = part::block_grid(n, 4, ref);
  auto moves = [&](const part::BlockRule& r, int64_t k_prev, Counts loads) {
    Counts c(4);
    part::initial_block_counts(g, 4, c.data());
    return part::balance_sweep(r, g, n, 4, k_prev, loads.data(), c.data());
  };
  EXPECT_EQ(moves(ref, 10043, {2636, 2000, 2510, 2510}), 1);
  EXPECT_EQ(moves(real, 10043, {2636, 2000, 2510, 2510}), 0);
  EXPECT_EQ(moves(ref, 4200000, {1200000, 999999, 1050000, 1050000}), 0);
  EXPECT_EQ(moves(real, 4200000, {1200000, 999999, 1050000, 1050000}), 1);
  // The key reaches the sparsifier's rule.
  SparsifierOptions o;
  o.params = {{"ref", "0"}};
  EXPECT_FALSE(ExDyna::blocks_from(sp_values("exdyna", o)).reference);
  EXPECT_TRUE(ExDyna::blocks_from(sp_values("exdyna", SparsifierOptions{})).reference);
}

// A partition that stays overloaded shrinks to 1024/(4P) = 64 blocks and no further.
TEST(ExDynaMoves, MinimumPartitionSize) {
  const part::BlockRule r;
  const int64_t n = 1 << 20;
  const part::BlockGrid g = part::block_grid(n, 4, r);
  Counts c(4);
  part::initial_block_counts(g, 4, c.data());
  for (int it = 0; it < 400; ++it) {
    Counts loads = {9000, 300, 400, 300};
    part::balance_sweep(r, g, n, 4, 10000, loads.data(), c.data());
  }
  EXPECT_EQ(c, (Counts{64, 448, 256, 256}));
  part::BlockRule small = r;
  small.min_div = 1;  // --sp min_div=1: 1024/4 = 256, nothing can shrink
  part::initial_block_counts(g, 4, c.data());
  Counts loads = {9000, 300, 400, 300};
  EXPECT_EQ(part::balance_sweep(small, g, n, 4, 10000, loads.data(), c.data()), 0);
}

// observe() maps rank r's count to the partition it owned, (t + r) mod P, and moves the
// boundaries for the next iteration; the partitions then follow the block counts.
TEST(ExDynaMoves, SparsifierMapsRankCountsToPartitions) {
  SparsifierOptions o;
  o.params = {{"blocks", "16"}};
  SparsifierPtr s = make_sparsifier("exdyna", o);
  auto& e = dynamic_cast<ExDyna&>(*s);
  const int64_t n = 1 << 20;
  std::vector<float> x(n, 0.0f);
  Selection sel;
  SelectContext c;
  c.world = 4;
  c.k = 10000;
  select_on_host(e, c, x.data(), n, sel);
  EXPECT_EQ(e.block_counts(0), (Counts{4, 4, 4, 4}));
  ExchangeFeedback f;
  f.iteration = 1;
  f.n = n;
  f.k = 10000;
  f.global_count = 100000;
  // At t = 1 rank r owned partition (1 + r) mod 4: loads [40000, 20100, 21900, 18000].
  f.rank_counts = {20100, 21900, 18000, 40000};
  const double before = e.state_signature(0);
  e.observe(f);
  EXPECT_EQ(e.block_counts(0), (Counts{3, 4, 4, 5}));
  EXPECT_EQ(e.moves(0), 3);
  EXPECT_EQ(e.partition(0, 3).begin, 11 * 65536);
  EXPECT_EQ(e.partition(0, 3).end, n);
  EXPECT_NE(e.state_signature(0), before);
  // A bucket too small for P blocks uses MiCRO's element partitions.
  select_on_host(
      e,
      [] {
        SelectContext s2;
        s2.bucket = 1;
        s2.world = 4;
        s2.k = 1;
        return s2;
      }(),
      x.data(), 100, sel);
  EXPECT_TRUE(e.block_counts(1).empty());
  EXPECT_EQ(e.partition(1, 1).begin, 25);
  EXPECT_EQ(sel.indices, (std::vector<int32_t>{0}));  // fallback: partition 0, t = 0
}

TEST(ExDynaMoves, BadKeysAreClearErrors) {
  SparsifierOptions o;
  o.params = {{"blocks", "0"}};
  EXPECT_THROW(make_sparsifier("exdyna", o), Error);
  o.params = {{"tol", "0.9"}};
  EXPECT_THROW(make_sparsifier("exdyna", o), Error);
  o.params = {{"align", "2.5"}};
  EXPECT_THROW(make_sparsifier("exdyna", o), Error);
  o.params = {{"fill", "maybe"}};
  EXPECT_THROW(make_sparsifier("exdyna", o), Error);
}

// Skewed gradients: the first quarter of the bucket is 3x larger (a layer with larger
// gradients), so equal partitions carry unequal loads. Different on every rank and step.
Tensor skewed(int64_t n, int rank, int64_t t) {
  Rng rng(7777ull * t + rank);
  Tensor g = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) g.f32()[i] = rng.normal() * (i < n / 4 ? 0.02f : 0.007f);
  return g;
}

struct RunStats {
  double padding = 0;  // mean over the second half
  double density = 0;
};

// Under mpirun: the boundaries and tau are identical on every rank after every step,
// selections stay inside the rank's own partition, and on P > 1 ranks ExDyna's padding
// overhead ends below MiCRO's on the same gradients.
RunStats run(const std::string& method, int64_t steps) {
  RunStats out;
  Communicator& c = world();
  const int P = c.size();
  SparsifierOptions opt;
  opt.density = 0.01;
  opt.params = {{"blocks", "128"}};
  if (method == "micro") opt.params.clear();
  SparsifyHook hook(make_sparsifier(method, opt), opt);
  auto& m = dynamic_cast<Micro&>(hook.sparsifier());
  Bucket bucket;
  bucket.numel = 65536;
  for (int64_t t = 0; t < steps; ++t) {
    // The partition this rank owns now (observe() moves boundaries for the next step).
    const int p = (t + c.rank()) % P;
    const part::Range own = t == 0 ? part::equal_partition(bucket.numel, P, p) : m.partition(0, p);
    Tensor g = skewed(bucket.numel, c.rank(), t);
    hook.exchange(bucket, g, c, t);
    const SparsifyStats s = hook.take_stats().at(0);
    if (t >= steps / 2) {
      out.padding += s.padding_overhead / static_cast<double>(steps - steps / 2);
      out.density += s.actual_density / static_cast<double>(steps - steps / 2);
    }

    // EXPECT, not ASSERT: an early return on one rank would desynchronise collectives.
    int64_t outside = 0;
    for (int32_t i : hook.last_selection(0).indices) outside += i < own.begin || i >= own.end;
    EXPECT_EQ(outside, 0) << method << " selected outside its partition at t=" << t;
    std::vector<float> state = {static_cast<float>(m.threshold(0))};
    if (auto* e = dynamic_cast<ExDyna*>(&m))
      for (int64_t v : e->block_counts(0)) state.push_back(static_cast<float>(v));
    Tensor mx = Tensor::from_vector(state, {static_cast<int64_t>(state.size())}), mn = mx.clone();
    c.allreduce(mx, ReduceOp::Max);
    c.allreduce(mn, ReduceOp::Min);
    for (size_t j = 0; j < state.size(); ++j)
      EXPECT_EQ(mx.f32()[j], mn.f32()[j]) << method << " state " << j << " differs at t=" << t;
  }
  return out;
}

TEST(ExDynaDistributed, SameBoundariesEverywhereAndLessPadding) {
  const int64_t steps = 160;
  const RunStats micro = run("micro", steps);
  const RunStats exdyna = run("exdyna", steps);
  if (world().rank() == 0)
    std::printf(
        "[ exdyna ] P=%d mean padding (2nd half): micro %.3f exdyna %.3f; density %.4f %.4f\n",
        world().size(), micro.padding, exdyna.padding, micro.density, exdyna.density);
  if (world().size() > 1) {
    EXPECT_LT(exdyna.padding, micro.padding);
  }
}

}  // namespace
}  // namespace st::test
