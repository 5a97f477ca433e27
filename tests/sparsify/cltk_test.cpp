// CLT-k: the leader rotates with t and is the only rank that selects; on one process
// the hook transmits exactly k positions, the leader's Top-k.
#include "sparsify/cltk.h"

#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "core/rng.h"
#include "sparsify/host_select.h"
#include "sparsify/kernels/select_cpu.h"
#include "sparsify/sparsify_hook.h"

namespace st::test {
namespace {

std::vector<float> heavy_tailed(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = rng.normal() * std::abs(rng.normal());
  return x;
}

TEST(SparsifyCltk, LeaderRotatesAndOnlyTheLeaderSelects) {
  const int64_t n = 5000;
  const std::vector<float> x = heavy_tailed(n, 1);
  std::vector<int32_t> expect;
  select::topk_abs(x.data(), n, 50, expect);
  CltK rule;
  for (int64_t t = 0; t < 9; ++t)
    for (int r = 0; r < 4; ++r) {
      SelectContext ctx;
      ctx.iteration = t;
      ctx.rank = r;
      ctx.world = 4;
      ctx.k = 50;
      Selection sel;
      select_on_host(rule, ctx, x.data(), n, sel);
      EXPECT_EQ(CltK::leader(t, 4), t % 4);
      if (r == t % 4) {
        EXPECT_EQ(sel.indices, expect) << "leader " << r << " at t=" << t;
      } else {
        EXPECT_TRUE(sel.indices.empty()) << "follower " << r << " selected at t=" << t;
      }
    }
}

TEST(SparsifyCltk, HookTransmitsExactlyK) {
  auto comm = make_communicator("local");
  SparsifierOptions opt;
  opt.density = 0.02;
  SparsifyHook hook(std::make_unique<CltK>(), opt);
  Bucket bucket;
  bucket.numel = 4000;
  const std::vector<float> x = heavy_tailed(bucket.numel, 2);
  Tensor g = Tensor::from_vector(x, {bucket.numel});
  hook.exchange(bucket, g, *comm, 0);
  const SparsifyStats s = hook.take_stats().at(0);
  EXPECT_EQ(s.k, 80);
  EXPECT_EQ(s.global_count, 80);
  std::vector<int32_t> expect;
  select::topk_abs(x.data(), bucket.numel, 80, expect);
  EXPECT_EQ(hook.last_result_indices(0), expect);
}

}  // namespace
}  // namespace st::test
