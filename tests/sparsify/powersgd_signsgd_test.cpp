// PowerSGD: layout of a bucket into matrices, Gram-Schmidt, exact recovery of a matrix of
// rank <= r, warm start converging to the best rank-r approximation, state round trip.
// EF-signSGD: scaled signs per tensor or bucket, the packed words, the hook's residual.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/communicator.h"
#include "core/rng.h"
#include "layers/param.h"
#include "sparsify/powersgd.h"
#include "sparsify/registry.h"
#include "sparsify/signsgd.h"
#include "sparsify/sparsify_hook.h"
#include "tests/sparsify/host_forms.h"

namespace st::test {
namespace {

SparsifierOptions opts(std::map<std::string, std::string> params = {}) {
  SparsifierOptions o;
  o.density = 1.0;
  o.seed = 3;
  o.params = std::move(params);
  return o;
}

std::unique_ptr<PowerSgd> powersgd(std::map<std::string, std::string> params = {}) {
  return std::make_unique<PowerSgd>(sp_values("powersgd", opts(std::move(params))));
}

// rows x cols matrix sum_j u_j v_j^T of the given rank, row-major.
std::vector<float> low_rank_matrix(int64_t rows, int64_t cols, int rank, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> m(rows * cols, 0.0f);
  for (int j = 0; j < rank; ++j) {
    std::vector<float> u(rows), v(cols);
    for (auto& e : u) e = rng.normal();
    for (auto& e : v) e = rng.normal();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < cols; ++c) m[i * cols + c] += u[i] * v[c];
  }
  return m;
}

double rel_error(const std::vector<float>& a, const float* b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    den += static_cast<double>(a[i]) * a[i];
  }
  return std::sqrt(num / den);
}

TEST(PowerSgd, LayoutReshapesMatricesAndSendsVectorsDense) {
  SelectContext ctx;
  ctx.segments = {0, 432, 448, 448 + 2000};
  ctx.rows = {16, 1, 40, 2};  // conv 16x3x3x3, bias, 40x50 matrix, 2x10 (too small to pay)
  const auto blocks = powersgd()->layout(ctx, 448 + 2000 + 20);
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].rows, 16);
  EXPECT_EQ(blocks[0].cols, 27);
  EXPECT_EQ(blocks[0].rank, 2);
  EXPECT_EQ(blocks[1].rank, 0) << "a vector travels dense";
  EXPECT_EQ(blocks[2].rank, 2);
  EXPECT_EQ(blocks[3].rank, 0) << "2 (2 + 10) >= 20: the factors would not be smaller";
  const auto big_min = powersgd({{"min_size", "2001"}})->layout(ctx, 2468);
  EXPECT_EQ(big_min[2].rank, 0) << "below min_size";
  SelectContext none;  // no tensor layout: the most square factorisation
  const auto one = powersgd()->layout(none, 6000);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].rows * one[0].cols, 6000);
  EXPECT_EQ(one[0].rows, 75);
}

TEST(PowerSgd, GramSchmidtGivesOrthonormalColumns) {
  std::vector<float> m = low_rank_matrix(50, 3, 3, 9);
  PowerSgd::orthogonalize(m.data(), 50, 3);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) {
      double dot = 0;
      for (int i = 0; i < 50; ++i) dot += static_cast<double>(m[i * 3 + a]) * m[i * 3 + b];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-5) << a << "," << b;
    }
}

TEST(PowerSgd, RecoversAMatrixOfRankRExactlyAndLeavesNoResidual) {
  auto comm = make_communicator("local");
  const std::vector<float> m = low_rank_matrix(30, 40, 2, 1);
  Tensor grads = Tensor::from_vector(m, {1200});
  Param p;
  p.grad = grads.slice_flat(0, {30, 40});
  Bucket bucket;
  bucket.numel = 1200;
  bucket.params = {&p};
  const SparsifierOptions o = opts();
  SparsifyHook hook(make_sparsifier("powersgd", o), o);
  hook.exchange(bucket, grads, *comm, 0);
  EXPECT_LT(rel_error(m, grads.f32()), 1e-4);
  const SparsifyStats s = hook.take_stats().at(0);
  EXPECT_EQ(s.local_count, 2 * (30 + 40));  // P and Q at rank 2
  EXPECT_LT(s.residual_norm, 1e-3);
}

// One rank, no error feedback: repeated compression of the same matrix with warm start
// is subspace iteration, so the error falls to that of the best rank-2 approximation;
// without warm start every step starts from a fresh random Q.
TEST(PowerSgd, WarmStartConvergesTowardTheBestRankRApproximation) {
  std::vector<float> m = low_rank_matrix(40, 60, 2, 2);
  const std::vector<float> tail = low_rank_matrix(40, 60, 6, 3);
  for (size_t i = 0; i < m.size(); ++i) m[i] = 10.0f * m[i] + tail[i];
  auto run = [&](bool warm, int steps) {
    auto ps = powersgd({{"warm_start", warm ? "1" : "0"}});
    SelectContext ctx;
    ctx.seed = 3;
    ctx.segments = {0};
    ctx.rows = {40};
    std::vector<float> out, second;
    double err = 0;
    for (int t = 0; t < steps; ++t) {
      ctx.iteration = t;
      Selection sel;
      select_host(*ps, ctx, m.data(), 2400, sel);
      second = second_message_host(*ps, ctx, m.data(), 2400, sel.values);
      out = decode_host(*ps, ctx, second, 2400);
      observe_summed(*ps, {0, t, 2400, 0, 0, {1}}, second);
      err = rel_error(m, out.data());
    }
    return err;
  };
  const double first = run(true, 1), warm = run(true, 12), cold = run(false, 12);
  EXPECT_LT(warm, first);
  EXPECT_LT(warm, 0.8 * cold) << "warm " << warm << " cold " << cold;
  EXPECT_LT(warm, 0.25);  // the rank-6 tail is about 17% of the norm
}

TEST(PowerSgd, StateRoundTripContinuesIdentically) {
  const std::vector<float> m = low_rank_matrix(20, 30, 4, 4);
  auto a = powersgd();
  SelectContext ctx;
  Selection sel;
  std::vector<float> second;
  select_host(*a, ctx, m.data(), 600, sel);
  second = second_message_host(*a, ctx, m.data(), 600, sel.values);
  observe_summed(*a, {0, 0, 600, 0, 0, {1}}, second);
  StateWriter w;
  a->save_state(w);
  auto b = powersgd();
  const std::vector<uint8_t> bytes = w.bytes();
  StateReader r(bytes.data(), bytes.size(), "test");
  b->load_state(r);
  EXPECT_DOUBLE_EQ(a->state_signature(0), b->state_signature(0));
  Selection sa, sb;
  ctx.iteration = 1;
  select_host(*a, ctx, m.data(), 600, sa);
  select_host(*b, ctx, m.data(), 600, sb);
  EXPECT_EQ(sa.values, sb.values);
}

TEST(SignSgd, ScaledSignsPerTensorAndTheirPackedWords) {
  SelectContext ctx;
  ctx.segments = {0, 40};
  const std::vector<float> x = [] {
    std::vector<float> v(100);
    for (int i = 0; i < 100; ++i) v[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (i < 40 ? 1.0f : 2.0f + i);
    return v;
  }();
  SignSgd rule(sp_values("signsgd", opts()));
  Selection sel, back;
  select_host(rule, ctx, x.data(), 100, sel);
  ASSERT_EQ(sel.packed.size(), 2u + 4u);  // two scales, 100 bits in 4 words
  double l1 = 0;
  for (int i = 40; i < 100; ++i) l1 += std::abs(x[i]);
  for (int i = 0; i < 100; ++i) {
    const float scale = i < 40 ? 1.0f : static_cast<float>(l1 / 60);
    EXPECT_FLOAT_EQ(sel.values[i], x[i] < 0 ? -scale : scale) << i;
  }
  unpack_host(rule, ctx, 100, sel.packed, back);
  EXPECT_EQ(back.indices, sel.indices);
  EXPECT_EQ(back.values, sel.values);
  SignSgd bucket_rule(sp_values("signsgd", opts({{"per_tensor", "0"}})));
  select_host(rule, ctx, x.data(), 100, sel);
  select_host(bucket_rule, ctx, x.data(), 100, back);
  EXPECT_EQ(back.packed.size(), 1u + 4u) << "one scale for the bucket";
  EXPECT_NE(back.values[0], sel.values[0]);
}

TEST(SignSgd, HookKeepsTheQuantisationErrorAsResidual) {
  auto comm = make_communicator("local");
  Rng rng(8);
  std::vector<float> g(3000);
  for (auto& v : g) v = rng.normal();
  Tensor grads = Tensor::from_vector(g, {3000});
  Bucket bucket;
  bucket.numel = 3000;
  const SparsifierOptions o = opts();
  SparsifyHook hook(make_sparsifier("signsgd", o), o);
  hook.exchange(bucket, grads, *comm, 0);
  double l1 = 0;
  for (float v : g) l1 += std::abs(v);
  const float scale = static_cast<float>(l1 / 3000);
  const Tensor res = hook.residual(0);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_FLOAT_EQ(grads.f32()[i], g[i] < 0 ? -scale : scale);
    ASSERT_FLOAT_EQ(res.f32()[i], g[i] - grads.f32()[i]);
  }
  EXPECT_EQ(hook.take_stats().at(0).bytes_sent, 16 + 4 * (1 + 3000 / 32 + 1));
}

}  // namespace
}  // namespace st::test
