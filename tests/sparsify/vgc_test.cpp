// Variance-based gradient compression (Tsuzuku et al. 2018): the layers' per-sample
// squared-gradient sums against brute-force per-sample loops, the SqGradients provider
// with its fallback, the send rule and the 32-bit packing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/flat_params.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "layers/softmax_cross_entropy.h"
#include "sparsify/sq_gradients.h"
#include "sparsify/vgc.h"
#include "tests/sparsify/host_forms.h"

namespace st::test {
namespace {

Tensor random_tensor(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = rng.normal();
  return t;
}

// Row i of a [N, ...] tensor as a [1, ...] tensor.
Tensor sample(const Tensor& t, int64_t i) {
  std::vector<int64_t> dims = t.shape().dims();
  dims[0] = 1;
  const int64_t per = t.numel() / t.dim(0);
  return t.slice_flat(i * per, Shape(dims)).clone();
}

void expect_close(const Tensor& got, const std::vector<double>& want, double rel,
                  const char* what) {
  double scale = 1e-30;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.f32()[i], want[i], rel * scale) << what << " element " << i;
}

// Linear: sample i's weight gradient is dy_i x_i^T, so (dy^2)^T (x^2) is exact.
TEST(SqGrads, LinearMatchesPerSampleLoopExactly) {
  Rng rng(1);
  Linear layer(5, 3, true, rng);
  const int64_t batch = 4;
  const Tensor x = random_tensor({batch, 5}, 2), dy = random_tensor({batch, 3}, 3);
  layer.weight().sq_grad = Tensor::zeros({3, 5});
  layer.bias()->sq_grad = Tensor::zeros({3});
  layer.forward(x);
  layer.backward(dy);
  std::vector<double> w2(15, 0.0), b2(3, 0.0);
  for (int64_t i = 0; i < batch; ++i) {
    Rng r2(1);
    Linear one(5, 3, true, r2);  // same weights
    one.forward(sample(x, i));
    one.backward(sample(dy, i));
    for (int j = 0; j < 15; ++j) w2[j] += std::pow(one.weight().grad.f32()[j], 2);
    for (int j = 0; j < 3; ++j) b2[j] += std::pow(one.bias()->grad.f32()[j], 2);
  }
  expect_close(layer.weight().sq_grad, w2, 1e-5, "weight");
  expect_close(layer.bias()->sq_grad, b2, 1e-5, "bias");
}

// Conv2d: the squared-operand GEMM computes sum over samples and output positions of
// (dy_p col_p)^2 (compared exactly against that sum written out from the definition);
// the true per-sample value (a brute-force per-sample backward) also has cross terms, so
// exact <= OH*OW * approximation (Cauchy-Schwarz) is all that holds. Bias: exact.
TEST(SqGrads, Conv2dSquaredOperandGemmAndItsRelationToPerSample) {
  const int64_t batch = 3, cin = 2, cout = 3, h = 5, w = 6, k = 3, stride = 1, pad = 1;
  const Tensor x = random_tensor({batch, cin, h, w}, 4), dy = random_tensor({batch, cout, h, w}, 5);
  for (CpuConvAlgo algo : {CpuConvAlgo::Im2col, CpuConvAlgo::Auto}) {
    SCOPED_TRACE(algo == CpuConvAlgo::Im2col ? "im2col" : "auto (oneDNN where built)");
    Rng rng(6);
    Conv2d conv(cin, cout, static_cast<int>(k), stride, pad, true, rng);
    conv.set_cpu_algo(algo);
    Rng rng_ref(6);
    Conv2d ref(cin, cout, static_cast<int>(k), stride, pad, true, rng_ref);
    ref.set_cpu_algo(algo);
    conv.weight().sq_grad = Tensor::zeros(conv.weight().grad.shape());
    conv.bias()->sq_grad = Tensor::zeros({cout});
    conv.forward(x);
    const Tensor dx = conv.backward(dy);
    ref.forward(x);
    const Tensor dx_ref = ref.backward(dy);
    // Enabling sq-grads leaves the gradients themselves unchanged.
    for (int64_t i = 0; i < dx.numel(); ++i) ASSERT_NEAR(dx.f32()[i], dx_ref.f32()[i], 1e-4);
    for (int64_t i = 0; i < conv.weight().grad.numel(); ++i)
      ASSERT_NEAR(conv.weight().grad.f32()[i], ref.weight().grad.f32()[i], 1e-4);
    // What the squared-operand GEMM computes, from the definition.
    std::vector<double> approx(cout * cin * k * k, 0.0);
    auto X = [&](int64_t n, int64_t c, int64_t y, int64_t xx) -> double {
      if (y < 0 || y >= h || xx < 0 || xx >= w) return 0.0;
      return x.f32()[((n * cin + c) * h + y) * w + xx];
    };
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t co = 0; co < cout; ++co)
        for (int64_t ci = 0; ci < cin; ++ci)
          for (int64_t kh = 0; kh < k; ++kh)
            for (int64_t kw = 0; kw < k; ++kw)
              for (int64_t oy = 0; oy < h; ++oy)
                for (int64_t ox = 0; ox < w; ++ox) {
                  const double t = dy.f32()[((n * cout + co) * h + oy) * w + ox] *
                                   X(n, ci, oy * stride - pad + kh, ox * stride - pad + kw);
                  approx[((co * cin + ci) * k + kh) * k + kw] += t * t;
                }
    expect_close(conv.weight().sq_grad, approx, 1e-5, "weight (squared-operand GEMM)");
    // The true per-sample sums.
    std::vector<double> exact(approx.size(), 0.0), b2(cout, 0.0);
    for (int64_t n = 0; n < batch; ++n) {
      Rng r2(6);
      Conv2d one(cin, cout, static_cast<int>(k), stride, pad, true, r2);
      one.set_cpu_algo(algo);
      one.forward(sample(x, n));
      one.backward(sample(dy, n));
      for (size_t j = 0; j < exact.size(); ++j) exact[j] += std::pow(one.weight().grad.f32()[j], 2);
      for (int64_t j = 0; j < cout; ++j) b2[j] += std::pow(one.bias()->grad.f32()[j], 2);
    }
    expect_close(conv.bias()->sq_grad, b2, 1e-5, "bias (exact)");
    double ratio_sum = 0;
    for (size_t j = 0; j < exact.size(); ++j) {
      const double a = conv.weight().sq_grad.f32()[j];
      ASSERT_LE(exact[j], h * w * a * (1 + 1e-5)) << "element " << j;
      ratio_sum += exact[j] / a;
    }
    std::printf("conv sq-grads: mean exact/approx over weights %.3f (OH*OW = %ld)\n",
                ratio_sum / exact.size(), static_cast<long>(h * w));
  }
}

// The provider: a bucket's slice of the flat sq-grad buffer; layers without per-sample
// sums (BatchNorm) get g^2 / B.
TEST(SqGrads, ProviderSlicesAndFallsBackForBatchNorm) {
  Rng rng(7);
  Sequential model;
  model.add(std::make_unique<Conv2d>(1, 2, 3, 1, 1, false, rng));
  model.add(std::make_unique<BatchNorm2d>(2));
  model.add(std::make_unique<Flatten>());
  model.add(std::make_unique<Linear>(2 * 4 * 4, 3, true, rng));
  FlatParams flat(model, Device::cpu());
  const int64_t batch = 5;
  SqGradients sq(flat, batch);
  flat.zero_grads();
  sq.zero();
  Tensor labels = Tensor::from_vector_i32({0, 1, 2, 1, 0}, {batch});
  SoftmaxCrossEntropy ce;
  ce.forward(model.forward(random_tensor({batch, 1, 4, 4}, 8)), labels);
  model.backward(ce.backward());
  Bucket b;
  b.id = 0;
  b.offset = 0;
  b.numel = flat.numel();
  b.params = std::vector<Param*>(flat.params().begin(), flat.params().end());
  const Tensor s = sq.bucket(b);
  ASSERT_EQ(s.numel(), flat.numel());
  for (Param* p : flat.params()) {
    const float* got = s.f32() + flat.offset(*p);
    const float* g = p->grad.f32();
    if (p->provides_sq_grad) {
      ASSERT_TRUE(p->sq_grad.defined()) << p->name;
      double sum = 0;
      for (int64_t i = 0; i < p->grad.numel(); ++i) sum += got[i];
      EXPECT_GT(sum, 0) << p->name;
      // Per element, g^2 <= B * sum_i (g_i / B)^2 (Cauchy-Schwarz): the mean's square is
      // bounded by the per-sample sum (exact for Linear; an approximation for Conv2d).
      if (p->name.find("3.") == 0) {
        for (int64_t i = 0; i < p->grad.numel(); ++i) {
          ASSERT_LE(g[i] * g[i], batch * got[i] * (1 + 1e-4) + 1e-12) << p->name << " " << i;
        }
      }
    } else {
      EXPECT_FALSE(p->sq_grad.defined()) << p->name;
      for (int64_t i = 0; i < p->grad.numel(); ++i)
        ASSERT_FLOAT_EQ(got[i], g[i] * g[i] / batch) << p->name << " " << i;
    }
  }
}

TEST(Vgc, SendsWhenAmplitudeBeatsVarianceResetsAndDecays) {
  SparsifierOptions o;  // alpha 1.5, zeta 0.999
  Vgc vgc(o);
  const std::vector<float> x = {1.0f, 0.1f, -2.0f, 0.5f};
  const std::vector<float> aux = {0.1f, 0.1f, 1.0f, 1.0f};
  SelectContext ctx;
  Selection sel;
  select_host(vgc, ctx, x.data(), 4, sel, {.aux = aux.data()});
  // 1 > 0.15 yes; 0.01 > 0.15 no; 4 > 1.5 yes; 0.25 > 1.5 no.
  EXPECT_EQ(sel.indices, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(sel.values, (std::vector<float>{1.0f, -2.0f}));  // powers of two of scale 2
  const std::vector<float> v = vgc.variance(0);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_FLOAT_EQ(v[1], 0.1f * 0.999f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_FLOAT_EQ(v[3], 0.999f);
  // Strom's rule on top: |r| > tau also sends.
  o.params = {{"tau", "0.4"}};
  Vgc hybrid(o);
  select_host(hybrid, ctx, x.data(), 4, sel, {.aux = aux.data()});
  EXPECT_EQ(sel.indices, (std::vector<int32_t>{0, 2, 3}));
  // Without sums, the fallback g^2 / B from the raw gradient.
  o.params = {{"batch", "4"}};
  Vgc fallback(o);
  select_host(fallback, SelectContext{}, x.data(), 4, sel, {.grad = x.data()});
  EXPECT_EQ(sel.indices.size(), 4u);  // r^2 = g^2 > 1.5 g^2 / 4
}

TEST(Vgc, PackingKeepsIndexAndSignWithinAThird) {
  for (int64_t n : {int64_t{10}, int64_t{6000}, int64_t{25'557'032}}) {
    const int ib = Vgc::index_bits(n);
    ASSERT_GE(int64_t{1} << ib, n);
    Rng rng(static_cast<uint64_t>(n));
    const float scale = 3.0f;
    for (int t = 0; t < 20000; ++t) {
      const int32_t idx = static_cast<int32_t>(rng.below(static_cast<uint32_t>(n)));
      const float a = scale * std::exp2(-12.0f * rng.uniform());
      const float v = rng.uniform() < 0.5f ? -a : a;
      const uint32_t word = quant::vgc_encode(idx, v, scale, ib);
      const int32_t i2 = quant::vgc_index(word, ib);
      const float v2 = quant::vgc_value(word, scale, ib);
      ASSERT_EQ(i2, idx);
      ASSERT_LE(std::abs(v2 - v), std::abs(v) / 3 * (1 + 1e-6f)) << v << " -> " << v2;
    }
  }
}

TEST(Vgc, UnpackReturnsTheSelection) {
  SparsifierOptions o;
  Vgc vgc(o);
  const int64_t n = 50000;
  const Tensor x = random_tensor({n}, 9);
  std::vector<float> aux(n, 0.5f);
  SelectContext ctx;
  Selection sel, back;
  select_host(vgc, ctx, x.f32(), n, sel, {.aux = aux.data()});
  ASSERT_GT(sel.indices.size(), 0u);
  EXPECT_EQ(sel.packed.size(), sel.indices.size() + 1);  // one scale word + one per entry
  unpack_host(vgc, ctx, n, sel.packed, back);
  EXPECT_EQ(back.indices, sel.indices);
  EXPECT_EQ(back.values, sel.values);
}

}  // namespace
}  // namespace st::test
