// FFT-based sparsification (Wang et al., HPDC 2020): reconstruction error falls as theta
// falls, the coefficient layout, the theta schedule and the packed message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "sparsify/fft.h"
#include "tests/sparsify/host_forms.h"

namespace st::test {
namespace {

// A gradient-like signal: a few smooth components plus heavy-tailed noise.
std::vector<float> signal(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / n;
    x[i] = static_cast<float>(std::sin(2 * M_PI * 3 * t) + 0.5 * std::cos(2 * M_PI * 17 * t) +
                              0.3 * rng.normal() * std::abs(rng.normal()));
  }
  return x;
}

// ||x - decode(select(x))|| / ||x|| at a given theta.
double reconstruction_error(const std::vector<float>& x, double theta, int bits,
                            const std::vector<int64_t>& segments = {}, int64_t block = 0) {
  SparsifierOptions o;
  o.params = {{"theta", std::to_string(theta)},
              {"bits", std::to_string(bits)},
              {"block", std::to_string(block)}};
  FftSparsifier sp(o);
  const int64_t n = static_cast<int64_t>(x.size());
  SelectContext ctx;
  ctx.segments = segments;
  Selection sel;
  select_host(sp, ctx, x.data(), n, sel);
  std::vector<float> coef(sp.domain_size(ctx, n), 0.0f);
  for (size_t j = 0; j < sel.indices.size(); ++j) coef[sel.indices[j]] = sel.values[j];
  const std::vector<float> y = decode_host(sp, ctx, coef, n);
  double e = 0, r = 0;
  for (int64_t i = 0; i < n; ++i) {
    e += static_cast<double>(y[i] - x[i]) * (y[i] - x[i]);
    r += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(e / r);
}

TEST(Fft, ReconstructionErrorFallsAsThetaFalls) {
  const std::vector<float> x = signal(10007, 1);  // a prime length: FFTW's general path
  double prev = 2.0;
  for (double theta : {0.99, 0.95, 0.8, 0.5, 0.2, 0.0}) {
    const double e = reconstruction_error(x, theta, 16);
    std::printf("theta %.2f: relative error %.4g\n", theta, e);
    EXPECT_LT(e, prev) << "theta " << theta;
    prev = e;
  }
  // theta = 0 keeps every coefficient: only the 16-bit quantisation error remains.
  EXPECT_LT(prev, 1e-3);
}

TEST(Fft, TwentyFourBitsAtThetaZeroIsNearlyLossless) {
  EXPECT_LT(reconstruction_error(signal(4096, 2), 0.0, 24), 1e-5);
}

TEST(Fft, PerTensorAndBlockLayouts) {
  const std::vector<float> x = signal(6000, 3);
  SparsifierOptions o;
  o.params = {{"block", "1000"}};
  FftSparsifier sp(o);
  SelectContext ctx;
  ctx.segments = {0, 100, 2600};  // tensors of 100, 2500 and 3400 elements
  const auto pieces = sp.layout(ctx, 6000);
  // 100 | 1000 1000 500 | 1000 1000 1000 400
  ASSERT_EQ(pieces.size(), 8u);
  EXPECT_EQ(pieces[3].begin, 2100);
  EXPECT_EQ(pieces[3].len, 500);
  int64_t domain = 0;
  for (const auto& p : pieces) domain += 2 * (p.len / 2 + 1);
  EXPECT_EQ(sp.domain_size(ctx, 6000), domain);
  // Per-tensor transforms reconstruct as well as the whole-buffer one.
  EXPECT_LT(reconstruction_error(x, 0.0, 24, ctx.segments, 1000), 1e-5);
  EXPECT_LT(reconstruction_error(x, 0.5, 16, ctx.segments, 1000), 0.5);
}

// Kept coefficients per transformed piece of one selection (domain offsets -> pieces).
std::vector<int64_t> kept_per_piece(const FftSparsifier& sp, const SelectContext& ctx, int64_t n,
                                    const Selection& sel) {
  const auto pieces = sp.layout(ctx, n);
  std::vector<int64_t> kept(pieces.size(), 0);
  for (size_t j = 0; j < sel.indices.size(); j += 2) {  // (re, im) pairs: count each once
    const int64_t d = sel.indices[j];
    for (size_t p = 0; p < pieces.size(); ++p)
      if (d >= pieces[p].coef && d < pieces[p].coef + 2 * (pieces[p].len / 2 + 1)) ++kept[p];
  }
  return kept;
}

// Every tensor keeps its own (1 - theta) share of its coefficients. |F| grows with
// sqrt(length), so a bucket-wide top-k would leave the short tensor (a bias, a BatchNorm
// scale) with nothing.
TEST(Fft, EachTensorKeepsItsShareOfCoefficients) {
  const int64_t big = 200000, small = 512, n = big + small + 64;
  std::vector<float> x = signal(n, 6);  // the same scale everywhere
  SparsifierOptions o;
  o.params = {{"theta", "0.99"}};
  FftSparsifier sp(o);
  SelectContext ctx;
  ctx.segments = {0, big, big + small};  // a weight, a bias-sized tensor, a tiny one
  Selection sel;
  select_host(sp, ctx, x.data(), n, sel);
  const auto pieces = sp.layout(ctx, n);
  const std::vector<int64_t> kept = kept_per_piece(sp, ctx, n, sel);
  ASSERT_EQ(kept.size(), 3u);
  for (size_t p = 0; p < pieces.size(); ++p) {
    const int64_t ncoef = pieces[p].len / 2 + 1;
    const int64_t share = std::max<int64_t>(1, static_cast<int64_t>(std::floor(0.01 * ncoef)));
    EXPECT_EQ(kept[p], share) << "tensor " << p << " of " << pieces[p].len << " elements";
  }
  EXPECT_EQ(kept[0], 1000);  // floor(0.01 * 100001)
  EXPECT_EQ(kept[1], 2);     // floor(0.01 * 257)
  EXPECT_EQ(kept[2], 1);     // floor(0.01 * 33) = 0: at least one per tensor
  // With --sp block, every block is a piece and keeps its own share too.
  o.params = {{"theta", "0.9"}, {"block", "4096"}};
  FftSparsifier blocked(o);
  select_host(blocked, ctx, x.data(), n, sel);
  const auto bp = blocked.layout(ctx, n);
  const std::vector<int64_t> kb = kept_per_piece(blocked, ctx, n, sel);
  for (size_t p = 0; p < bp.size(); ++p)
    EXPECT_EQ(kb[p],
              std::max<int64_t>(1, static_cast<int64_t>(std::floor(0.1 * (bp[p].len / 2 + 1)))))
        << "piece " << p;
}

TEST(Fft, ThetaDiminishesOnSchedule) {
  SparsifierOptions o;
  o.params = {{"decay", "0.5"}, {"every", "10"}, {"theta_min", "0.2"}};
  FftSparsifier sp(o);
  EXPECT_DOUBLE_EQ(sp.theta(0, 0.01), 0.99);  // theta_0 = 1 - density
  EXPECT_DOUBLE_EQ(sp.theta(9, 0.01), 0.99);
  EXPECT_DOUBLE_EQ(sp.theta(10, 0.01), 0.495);
  EXPECT_DOUBLE_EQ(sp.theta(1000, 0.01), 0.2);
  o.params = {{"theta", "0.9"}};
  EXPECT_DOUBLE_EQ(FftSparsifier(o).theta(0, 0.01), 0.9);
}

TEST(Fft, PackedMessageHoldsIndicesAndCodes) {
  const int64_t n = 5000;
  const std::vector<float> x = signal(n, 4);
  for (int bits : {8, 16}) {
    SparsifierOptions o;
    o.density = 0.02;
    o.params = {{"bits", std::to_string(bits)}};
    FftSparsifier sp(o);
    SelectContext ctx;
    ctx.density = 0.02;
    Selection sel;
    select_host(sp, ctx, x.data(), n, sel);
    const int64_t k = static_cast<int64_t>(std::floor(0.02 * (n / 2 + 1)));
    ASSERT_EQ(static_cast<int64_t>(sel.indices.size()), 2 * k);
    EXPECT_EQ(static_cast<int64_t>(sel.packed.size()), 2 + k + (2 * k * bits + 31) / 32);
    Selection back;
    unpack_host(sp, ctx, n, sel.packed, back);
    EXPECT_EQ(back.indices, sel.indices);
    EXPECT_EQ(back.values, sel.values);
    // Kept: the largest-magnitude coefficients (the smooth components at 3 and 17).
    bool has3 = false, has17 = false;
    for (int32_t i : sel.indices) {
      has3 |= i == 6;
      has17 |= i == 34;
    }
    EXPECT_TRUE(has3 && has17);
  }
}

}  // namespace
}  // namespace st::test

#ifdef SPARSETRAIN_WITH_CUDA
#include "sparsify/kernels/fft_cuda.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {
namespace {

// cuFFT R2C gives FFTW's coefficients in the same layout; C2R / N inverts it.
TEST(FftCuda, ForwardMatchesFftwAndInverseRoundTrips) {
  ST_REQUIRE_CUDA_DEVICE();
  const int64_t n = 4096, m = 2 * (n / 2 + 1);
  const std::vector<float> x = signal(n, 5);
  SparsifierOptions o;
  o.params = {{"theta", "0"}, {"bits", "24"}};
  FftSparsifier cpu(o);
  SelectContext ctx;
  Selection sel;
  select_host(cpu, ctx, x.data(), n, sel);  // every coefficient, 24-bit: near-exact
  std::vector<float> ref(m, 0.0f);
  for (size_t j = 0; j < sel.indices.size(); ++j) ref[sel.indices[j]] = sel.values[j];
  const Device gpu = Device::cuda(0);
  const Tensor xd = Tensor::from_vector(x, {n}).to(gpu);
  Tensor coef = Tensor::empty({m}, DType::F32, gpu), scratch = Tensor::empty({m}, DType::F32, gpu),
         back = Tensor::empty({n}, DType::F32, gpu);
  fft::CufftPlans plans;
  const std::vector<bulk::FftPiece> whole = {{0, n, 0}};
  plans.rfft(xd.f32(), whole, coef.f32());
  const Tensor c = coef.to(Device::cpu());
  float scale = 0;
  for (float v : ref) scale = std::max(scale, std::abs(v));
  for (int64_t i = 0; i < m; ++i) ASSERT_NEAR(c.f32()[i], ref[i], 1e-4 * scale) << i;
  plans.irfft(coef.f32(), whole, back.f32(), scratch.f32());
  const Tensor b = back.to(Device::cpu());
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(b.f32()[i], x[i], 1e-4) << i;
}

}  // namespace
}  // namespace st::test
#endif
