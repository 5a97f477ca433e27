// Hand-computed values: convolution, pooling, batch norm, loss, the dropout mask.
#include <gtest/gtest.h>

#include <cmath>

#include "core/kernels/math.h"
#include "layers/batchnorm2d.h"
#include "layers/bce_with_logits.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/halves_product.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/sequential.h"
#include "layers/softmax_cross_entropy.h"
#include "tests/error_text.h"

namespace st::test {
namespace {

void expect_values(const Tensor& t, const std::vector<float>& want, float tol = 1e-5f) {
  std::vector<float> got = t.to_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// Input 1..9 as a 3x3 image, 2x2 kernel [[1,0],[0,-1]], padding 1, stride 1 -> 4x4:
// out(y,x) = in(y-1,x-1) - in(y,x) + bias 0.5, with zeros outside.
TEST(KnownValues, Conv2dPadded) {
  Rng rng(0);
  Conv2d conv(1, 1, 2, 1, 1, true, rng);
  conv.weight().value.copy_from(Tensor::from_vector({1, 0, 0, -1}, {1, 1, 2, 2}));
  conv.bias()->value.fill(0.5f);
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor y = conv.forward(x);
  ASSERT_EQ(y.shape(), Shape({1, 1, 4, 4}));
  expect_values(y, {-0.5f, -1.5f, -2.5f, 0.5f, -3.5f, -3.5f, -3.5f, 3.5f, -6.5f, -3.5f, -3.5f, 6.5f,
                    0.5f, 7.5f, 8.5f, 9.5f});
}

// A 1x3 kernel [1, 2, 3] with padding (0, 1) and stride (2, 1) over rows 1..4 x columns
// of a 4x3 image: each output is 1*left + 2*centre + 3*right of every other row, zeros
// beyond the columns, no rows padded. Both CPU algorithms.
TEST(KnownValues, Conv2dRectangularKernelStridePadding) {
  std::vector<CpuConvAlgo> algos = {CpuConvAlgo::Im2col};
  if (cpu::onednn_built()) algos.push_back(CpuConvAlgo::OneDnn);
  for (CpuConvAlgo algo : algos) {
    Rng rng(0);
    Conv2d conv(1, 1, Hw{1, 3}, Hw{2, 1}, Hw{0, 1}, false, rng);
    conv.set_cpu_algo(algo);
    EXPECT_EQ(conv.describe(), "Conv2d(1->1, k1x3, s2x1, p0x1)");
    EXPECT_EQ(conv.weight().value.shape(), Shape({1, 1, 1, 3}));
    conv.weight().value.copy_from(Tensor::from_vector({1, 2, 3}, {1, 1, 1, 3}));
    // rows: [1 2 3], [4 5 6], [7 8 9], [10 11 12]; rows 0 and 2 are read.
    Tensor y =
        conv.forward(Tensor::from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 1, 4, 3}));
    ASSERT_EQ(y.shape(), Shape({1, 1, 2, 3}));
    // row 0: 2*1+3*2 = 8, 1+4+9 = 14, 2+6 = 8; row 2: 14+24 = 38, 7+16+27 = 50, 8+18 = 26
    expect_values(y, {8, 14, 8, 38, 50, 26});
  }
}

// Two input channels, stride 2, no padding: a 2x2 sum over both channels.
TEST(KnownValues, Conv2dStrideTwoChannels) {
  Rng rng(0);
  Conv2d conv(2, 1, 2, 2, 0, false, rng);
  conv.weight().value.fill(1.0f);
  std::vector<float> v(32);
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i);
  Tensor y = conv.forward(Tensor::from_vector(v, {1, 2, 4, 4}));
  // block (0,0): channel 0 gives 0+1+4+5 = 10, channel 1 gives 16+17+20+21 = 74 -> 84
  expect_values(y, {84, 100, 148, 164});
}

TEST(KnownValues, MaxAndAvgPool) {
  Tensor x = Tensor::from_vector({1, 5, 2, 0, 3, 4, 8, 1, 0, 2, 6, 7, 9, 1, 3, 2}, {1, 1, 4, 4});
  MaxPool2d mp(2, 2);
  expect_values(mp.forward(x), {5, 8, 9, 7});
  AvgPool2d ap(2, 2);
  expect_values(ap.forward(x), {13 / 4.0f, 11 / 4.0f, 12 / 4.0f, 18 / 4.0f});
  // The max-pool gradient goes to the arg-max only.
  Tensor dx = mp.backward(Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2}));
  expect_values(dx, {0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 4, 3, 0, 0, 0});
}

// torch.sigmoid and torch.nn.functional.gelu (exact erf form) at the same points, and
// their derivatives: sigma' = sigma (1 - sigma), gelu' = Phi(x) + x phi(x).
TEST(KnownValues, SigmoidAndGelu) {
  const Tensor x = Tensor::from_vector({-1.0f, 0.0f, 1.0f, 2.0f}, {4});
  Sigmoid sigmoid;
  expect_values(sigmoid.forward(x), {0.26894142f, 0.5f, 0.73105858f, 0.88079708f});
  expect_values(sigmoid.backward(Tensor::from_vector({1, 1, 1, 1}, {4})),
                {0.19661193f, 0.25f, 0.19661193f, 0.10499359f});
  GELU gelu;
  expect_values(gelu.forward(x), {-0.15865525f, 0.0f, 0.84134475f, 1.95449974f});
  expect_values(gelu.backward(Tensor::from_vector({1, 1, 1, 1}, {4})),
                {-0.08331547f, 0.5f, 1.08331547f, 1.08523453f});
}

TEST(KnownValues, BatchNormTrainAndRunningStats) {
  BatchNorm2d bn(1, 0.0f, 0.5f);
  Tensor x = Tensor::from_vector({1, 2, 3, 6}, {2, 1, 1, 2});  // mean 3, biased var 3.5
  Tensor y = bn.forward(x);
  const float s = 1.0f / std::sqrt(3.5f);
  expect_values(y, {-2 * s, -1 * s, 0, 3 * s});
  // running = 0.5*init + 0.5*batch; running_var uses the unbiased 14/3.
  expect_values(bn.running_mean(), {1.5f});
  expect_values(bn.running_var(), {0.5f + 0.5f * 14.0f / 3.0f});
  bn.set_training(false);
  Tensor z = bn.forward(Tensor::from_vector({1.5f}, {1, 1, 1, 1}));
  expect_values(z, {0.0f});
}

// The dropout mask is the per-element rule math::dropout_keep(seed, call, i, p) (which the
// CUDA kernel also uses), whatever blocking the CPU loop applies: checked on a length that
// is not a multiple of four and large enough for the threaded path, forward and backward,
// over two calls (two streams).
TEST(KnownValues, DropoutMaskIsThePerElementRule) {
  const float p = 0.3f, scale = 1.0f / (1.0f - p);
  const uint64_t seed = 1234;
  Dropout drop(p, seed);
  const int64_t n = 40003;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 1.0f + static_cast<float>(i % 97);
  const Tensor x = Tensor::from_vector(v, {n});
  for (uint64_t call = 0; call < 2; ++call) {
    const std::vector<float> y = drop.forward(x).to_vector();
    const std::vector<float> dx = drop.backward(x).to_vector();
    int64_t kept = 0, wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = math::dropout_keep(seed, call, static_cast<uint64_t>(i), p);
      const float want = keep ? v[i] * scale : 0.0f;
      kept += keep;
      wrong += (y[i] != want) + (dx[i] != want);
    }
    EXPECT_EQ(wrong, 0) << "call " << call;
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.01) << "call " << call;
  }
}

// A model's Dropout state: the masks drawn, per layer, round-trip (what a checkpoint keeps);
// another layer count is refused; rank 0 keeps the built seeds, another rank draws other
// masks.
TEST(KnownValues, DropoutStateOfAModel) {
  auto model = [] {
    auto net = std::make_unique<Sequential>();
    net->add("a", std::make_unique<Dropout>(0.5f, 11));
    net->add("b", std::make_unique<Dropout>(0.5f, 12));
    net->set_training(true);
    return net;
  };
  auto first = model();
  const Tensor x = Tensor::from_vector(std::vector<float>(64, 1.0f), {64});
  first->forward(x);
  first->forward(x);
  EXPECT_EQ(dropout_calls(*first), (std::vector<uint64_t>{2, 2}));
  auto second = model();
  set_dropout_calls(*second, dropout_calls(*first));
  EXPECT_EQ(second->forward(x).to_vector(), first->forward(x).to_vector());
  EXPECT_NE(error_of([&] {
              set_dropout_calls(*second, {1});
            }).find("the model has 2 Dropout layers but 1 mask counts were given"),
            std::string::npos);

  auto rank0 = model(), rank1 = model();
  seed_dropout_for_rank(*rank0, 0);
  seed_dropout_for_rank(*rank1, 1);
  const std::vector<float> y0 = rank0->forward(x).to_vector(), y1 = rank1->forward(x).to_vector();
  EXPECT_EQ(y0, model()->forward(x).to_vector());
  EXPECT_NE(y0, y1);
}

TEST(KnownValues, SoftmaxCrossEntropyStableForHugeLogits) {
  SoftmaxCrossEntropy loss;
  Tensor logits = Tensor::from_vector({1000, 0, -1000, 1e4f, 1e4f, 0}, {2, 3});
  float l = loss.forward(logits, Tensor::from_vector_i32({0, 1}, {2}));
  // Row 0: log(1 + e^-1000 + ...) ~ 0; row 1: log 2.
  EXPECT_NEAR(l, std::log(2.0f) / 2, 1e-5f);
  EXPECT_TRUE(std::isfinite(l));
  EXPECT_EQ(loss.correct(), 1);  // row 1 ties at 1e4: the first index wins, as torch.argmax
}

// [a | b] -> a * b per row; each half's gradient is dy times the other half.
TEST(KnownValues, HalvesProduct) {
  HalvesProduct layer;
  const Tensor x = Tensor::from_vector({1, 2, 3, 4, -1, 0.5f, 2, -2}, {2, 4});
  expect_values(layer.forward(x), {3, 8, -2, -1});
  expect_values(layer.backward(Tensor::from_vector({1, 10, 2, 3}, {2, 2})),
                {3, 40, 1, 20, 4, -6, -2, 1.5f});
}

// mean of max(z, 0) - z y + log(1 + e^-|z|); gradient (sigmoid(z) - y) / N; huge logits
// stay finite.
TEST(KnownValues, BceWithLogits) {
  BceWithLogits loss;
  const Tensor z = Tensor::from_vector({0, 2, -1000, 1000}, {4, 1});
  const float l = loss.forward(z, Tensor::from_vector({1, 0, 0, 0}, {4}));
  const double want = (std::log(2.0) + 2 + std::log1p(std::exp(-2.0)) + 0 + 1000) / 4;
  EXPECT_NEAR(l, want, 1e-5);
  EXPECT_EQ(loss.correct(), 1);  // only -1000 vs 0; z = 0 is no positive call
  const double s2 = 1 / (1 + std::exp(-2.0));
  expect_values(loss.backward(), {-0.125f, static_cast<float>(s2 / 4), 0, 0.25f});
}

// Per-sample squared-gradient sums (VGC's side input): a lookup is a sample, repeated rows
// add their squares, rows never looked up stay zero.
TEST(KnownValues, EmbeddingSquaredGradientSums) {
  Rng rng(1);
  Embedding layer(3, 2, rng);
  layer.weight().sq_grad = Tensor::zeros({3, 2});
  layer.forward(Tensor::from_vector_i32({2, 0, 2}, {3}));
  layer.backward(Tensor::from_vector({1, -2, 3, 4, 0.5f, 1}, {3, 2}));
  expect_values(layer.weight().grad, {3, 4, 0, 0, 1.5f, -1});
  expect_values(layer.weight().sq_grad, {9, 16, 0, 0, 1.25f, 5});
}

}  // namespace
}  // namespace st::test
