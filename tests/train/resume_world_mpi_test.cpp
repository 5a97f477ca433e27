// A MiCRO or ExDyna checkpoint of another number of ranks restored on this world (2 ranks
// given a 4-rank checkpoint, 4 ranks given a 2-rank one; sparsify/hook_checkpoint.h):
// each rank gets the old residuals sparsify/resplit.h assigns it, their sum over the ranks
// is kept, the threshold carries over, the partitions follow the new world, and the
// exchange goes on. A checkpoint whose rule state differs between ranks is refused in one
// line.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "comm/communicator.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "sparsify/exdyna.h"
#include "sparsify/hook_checkpoint.h"
#include "sparsify/hook_state.h"
#include "sparsify/host_select.h"
#include "sparsify/micro.h"
#include "sparsify/partition_math.h"
#include "sparsify/registry.h"
#include "tests/comm/mpi_test_run.h"

namespace st::test {
namespace {

const std::vector<int64_t> kSizes = {3000, 700};  // two buckets

SparsifierOptions options() {
  SparsifierOptions o;
  o.density = 0.02;
  o.seed = 5;
  return o;
}

std::vector<float> random_vector(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// What old rank q of `old_world` held after one exchange of every bucket: its own
// residuals and MiCRO's rule state (the same on every rank: it follows the global
// count, here `global_count`).
struct OldRank {
  HookState state;
  std::vector<double> thresholds;  // per bucket, what the next selection would use
  std::vector<int64_t> moves;      // per bucket, ExDyna's boundary moves so far
};

OldRank old_rank(const std::string& method, int q, int old_world, int64_t global_count) {
  const SparsifierOptions o = options();
  SparsifierPtr sp = make_sparsifier(method, o);
  OldRank out;
  out.state.method = method;
  for (size_t b = 0; b < kSizes.size(); ++b) {
    const int64_t n = kSizes[b];
    SelectContext ctx;
    ctx.bucket = static_cast<int>(b);
    ctx.rank = q;
    ctx.world = old_world;
    ctx.density = o.density;
    ctx.k = static_cast<int64_t>(o.density * static_cast<double>(n));
    const std::vector<float> x = random_vector(n, 1000u + static_cast<unsigned>(q));
    Selection sel;
    select_on_host(*sp, ctx, x.data(), n, sel);
    ExchangeFeedback fb;
    fb.bucket = ctx.bucket;
    fb.n = n;
    fb.k = ctx.k;
    fb.global_count = global_count;
    fb.rank_counts.assign(static_cast<size_t>(old_world), global_count / old_world);
    sp->observe(fb);
    out.state.residuals[ctx.bucket] = random_vector(n, 77u * static_cast<unsigned>(q + 1) + b);
    out.thresholds.push_back(dynamic_cast<Micro&>(*sp).threshold(ctx.bucket));
    auto* exdyna = dynamic_cast<ExDyna*>(sp.get());
    out.moves.push_back(exdyna ? exdyna->moves(ctx.bucket) : 0);
  }
  StateWriter rule;
  sp->save_state(rule);
  out.state.rule = rule.bytes();
  return out;
}

// Rank 0 writes the old world's rows as a checkpoint's sparsifier state.
std::string write_checkpoint(const std::vector<OldRank>& old, const std::string& name) {
  Communicator& comm = world();
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("st_resume_world_np" + std::to_string(comm.size()) + "_" + name + ".safetensors"))
          .string();
  if (comm.rank() == 0) {
    std::vector<std::vector<uint8_t>> rows;
    for (const OldRank& q : old) rows.push_back(write_hook_state(q.state));
    TensorFile f;
    f.tensors = sparsify_state_tensors(rows);
    save_safetensors(path, f);
  }
  comm.barrier();
  return path;
}

int other_world() {
  return world().size() == 4 ? 2 : 4;
}

class ResumeOnAnotherWorld : public ::testing::TestWithParam<const char*> {};

TEST_P(ResumeOnAnotherWorld, ResidualsAndRuleFollowTheNewRanks) {
  Communicator& comm = world();
  const std::string method = GetParam();
  const int P = comm.size(), r = comm.rank(), Q = other_world();
  std::vector<OldRank> old;
  for (int q = 0; q < Q; ++q) old.push_back(old_rank(method, q, Q, 90));
  const std::string path = write_checkpoint(old, method);
  SparsifyHook hook(make_sparsifier(method, options()), options());
  ASSERT_TRUE(restore_sparsify_state(hook, path, comm));
  auto& micro = dynamic_cast<Micro&>(hook.sparsifier());
  for (size_t b = 0; b < kSizes.size(); ++b) {
    const int id = static_cast<int>(b);
    const int64_t n = kSizes[b];
    // This rank's residual: old ranks r, r + P, ... added in that order (none: zeros).
    std::vector<float> want;
    for (int q = r; q < Q; q += P) {
      const std::vector<float>& v = old[static_cast<size_t>(q)].state.residuals.at(id);
      if (want.empty()) {
        want = v;
      } else {
        for (size_t i = 0; i < v.size(); ++i) want[i] += v[i];
      }
    }
    const Tensor got = hook.residual(id);
    if (want.empty()) {
      const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
      EXPECT_TRUE(!got.defined() || got.to_vector() == zeros) << "rank " << r << " bucket " << b;
    } else {
      ASSERT_TRUE(got.defined());
      EXPECT_EQ(got.to_vector(), want) << "rank " << r << " bucket " << b;
    }
    // The sum over the ranks, what error feedback still owes the model, is kept.
    Tensor sum = got.defined() ? got.clone() : Tensor::zeros({n});
    comm.allreduce(sum);
    for (int64_t i = 0; i < n; ++i) {
      double before = 0;
      for (const OldRank& q : old) before += q.state.residuals.at(id)[static_cast<size_t>(i)];
      ASSERT_NEAR(sum.f32()[i], before, 1e-5) << "bucket " << b << " element " << i;
    }
    // The threshold carries over; the partitions are the new world's.
    EXPECT_EQ(micro.threshold(id), old[0].thresholds[b]);
    // MiCRO: equal partitions; ExDyna: P block-aligned partitions that tile the bucket
    // (near-equal block counts, as for a fresh bucket), its move count carried over.
    auto* exdyna = dynamic_cast<ExDyna*>(&micro);
    int64_t next = 0;
    for (int p = 0; p < P; ++p) {
      const part::Range got_range = micro.partition(id, p);
      if (!exdyna) {
        const part::Range want_range = part::equal_partition(n, P, p);
        EXPECT_EQ(got_range.begin, want_range.begin);
        EXPECT_EQ(got_range.end, want_range.end);
      }
      EXPECT_EQ(got_range.begin, next) << "partition " << p;
      next = got_range.end;
    }
    EXPECT_EQ(next, n);
    if (exdyna) {
      EXPECT_EQ(exdyna->block_counts(id).size(), static_cast<size_t>(P));
      EXPECT_EQ(exdyna->moves(id), old[0].moves[b]);
    }
  }
  // The exchange goes on at this world size, with the residual folded in.
  for (size_t b = 0; b < kSizes.size(); ++b) {
    Bucket bucket;
    bucket.id = static_cast<int>(b);
    bucket.numel = kSizes[b];
    Tensor g =
        Tensor::from_vector(random_vector(kSizes[b], 5u + static_cast<unsigned>(r)), {kSizes[b]});
    EXPECT_NO_THROW(hook.exchange(bucket, g, comm, 1));
  }
  const std::vector<SparsifyStats> stats = hook.take_stats();
  ASSERT_EQ(stats.size(), kSizes.size());
  for (const SparsifyStats& s : stats) EXPECT_GT(s.global_count, 0);
  if (r == 0) std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Methods, ResumeOnAnotherWorld, ::testing::Values("micro", "exdyna"));

TEST(ResumeOnAnotherWorldRefusal, RuleStateThatDiffersBetweenRanksIsRefused) {
  Communicator& comm = world();
  const int Q = other_world();
  std::vector<OldRank> old;
  for (int q = 0; q < Q; ++q) old.push_back(old_rank("micro", q, Q, q == 1 ? 1 : 90));
  const std::string path = write_checkpoint(old, "differs");
  SparsifyHook hook(make_sparsifier("micro", options()), options());
  try {
    restore_sparsify_state(hook, path, comm);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string line = e.what();
    EXPECT_NE(line.find("differs between the checkpoint's ranks"), std::string::npos) << line;
    EXPECT_NE(line.find("resume it on " + std::to_string(Q) + " ranks, not " +
                        std::to_string(comm.size())),
              std::string::npos)
        << line;
  }
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove(path);
}

}  // namespace
}  // namespace st::test
