// The 16-channel blocked layout (core/layout.h): conversions, the guard against reading
// blocked memory as NCHW, the layers that take it (Conv2d, BatchNorm2d, ReLU, the residual
// add) against the plain layout, and a whole ResNet step with and without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "core/kernels/conv_onednn.h"
#include "core/layout.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "layers/batchnorm2d.h"
#include "layers/concat.h"
#include "layers/conv2d.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"
#include "layers/squeeze_excite.h"
#include "models/registry.h"
#include "models/shortcut_pad.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

// Largest |a - b| over the largest |b| (at least 1).
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, ref = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(a[i] - b[i])));
    ref = std::max(ref, static_cast<double>(std::abs(b[i])));
  }
  return err / ref;
}

std::vector<float> plain_values(const Tensor& t) {
  return to_plain(t).to_vector();
}

TEST(BlockedLayout, ConversionPutsSixteenChannelsInnermostAndBack) {
  Rng rng(3);
  const Tensor x = random_tensor({2, 32, 3, 5}, rng);
  const Tensor b = to_layout(x, Layout::Blocked16);
  ASSERT_EQ(b.layout(), Layout::Blocked16);
  const float* plain = x.f32();
  const float* blocked = b.f32_in_layout();
  const int64_t hw = 15;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 32; ++c)
      for (int64_t p = 0; p < hw; ++p)
        ASSERT_EQ(blocked[((n * 2 + c / 16) * hw + p) * 16 + c % 16], plain[(n * 32 + c) * hw + p])
            << "n " << n << " c " << c << " p " << p;
  const Tensor back = to_plain(b);
  EXPECT_EQ(back.to_vector(), x.to_vector());
  EXPECT_TRUE(to_layout(b, Layout::Blocked16).shares_storage(b));  // no copy when already there
}

// Concat and SqueezeExcite make a blocked input and gradient plain for their channel ops:
// the same output and input gradient as from plain tensors.
TEST(BlockedLayout, ConcatAndSqueezeExciteTakeEitherLayout) {
  Rng rng(4);
  auto concat = [] {
    auto join = std::make_unique<Concat>();
    join->add("a", std::make_unique<ReLU>()).add("b", std::make_unique<Sigmoid>());
    return join;
  };
  auto se = [] {
    Rng init(5);
    return std::make_unique<SqueezeExcite>(32, 2, init);
  };
  for (const auto& make : {std::function<LayerPtr()>(concat), std::function<LayerPtr()>(se)}) {
    LayerPtr plain = make(), blocked = make();
    const Tensor x = random_tensor({2, 32, 3, 3}, rng);
    const Tensor y = plain->forward(x);
    const Tensor yb = blocked->forward(to_layout(x, Layout::Blocked16));
    EXPECT_EQ(plain_values(yb), y.to_vector()) << plain->describe();
    const Tensor dy = random_tensor(y.shape(), rng);
    const Tensor dx = plain->backward(dy);
    const Tensor dxb = blocked->backward(to_layout(dy, Layout::Blocked16));
    EXPECT_EQ(plain_values(dxb), dx.to_vector()) << plain->describe();
  }
}

TEST(BlockedLayout, ReadingBlockedMemoryAsNchwThrows) {
  Rng rng(3);
  const Tensor b = to_layout(random_tensor({1, 16, 2, 2}, rng), Layout::Blocked16);
  EXPECT_THROW(b.f32(), Error);
  EXPECT_THROW(b.reshape({64}), Error);
  EXPECT_THROW(b.to_vector(), Error);
  EXPECT_THROW(to_layout(random_tensor({1, 3, 2, 2}, rng), Layout::Blocked16), Error);
  EXPECT_NE(b.str().find("nChw16c"), std::string::npos) << b.str();
}

TEST(BlockedLayout, AddConvertsTheSecondOperandToTheFirstsLayout) {
  Rng rng(5);
  const Tensor a = random_tensor({3, 16, 4, 4}, rng), s = random_tensor({3, 16, 4, 4}, rng);
  Tensor want = a.clone();
  add_inplace(want, s);
  Tensor blocked = to_layout(a, Layout::Blocked16).clone();
  add_inplace(blocked, s);
  EXPECT_EQ(blocked.layout(), Layout::Blocked16);
  EXPECT_EQ(plain_values(blocked), want.to_vector());
}

struct BnResult {
  std::vector<float> y, dx, dgamma, dbeta, mean, var;
};

BnResult run_bn(bool blocked, bool training, const Shape& shape) {
  BatchNorm2d bn(shape[1]);
  Rng init(11);
  bn.weight().value.copy_from(random_tensor({shape[1]}, init));
  bn.bias().value.copy_from(random_tensor({shape[1]}, init));
  bn.set_training(training);
  Rng data(13);
  Tensor x = random_tensor(shape, data, 3.0f);
  const Tensor dy = random_tensor(shape, data);
  if (blocked) x = to_layout(x, Layout::Blocked16);
  const Tensor y = bn.forward(x);
  EXPECT_EQ(y.layout(), x.layout());
  const Tensor dx = bn.backward(blocked ? to_layout(dy, Layout::Blocked16) : dy);
  EXPECT_EQ(dx.layout(), x.layout());
  return {plain_values(y),
          plain_values(dx),
          bn.weight().grad.to_vector(),
          bn.bias().grad.to_vector(),
          bn.running_mean().to_vector(),
          bn.running_var().to_vector()};
}

TEST(BlockedLayout, BatchNormMatchesThePlainLayout) {
  // 11 images: not a multiple of the 8-image chunks the blocked sums use.
  for (bool training : {true, false}) {
    const BnResult plain = run_bn(false, training, {11, 32, 5, 3});
    const BnResult blocked = run_bn(true, training, {11, 32, 5, 3});
    EXPECT_LE(rel_err(blocked.y, plain.y), 1e-5) << "training " << training;
    EXPECT_LE(rel_err(blocked.dx, plain.dx), 1e-5) << "training " << training;
    EXPECT_LE(rel_err(blocked.dgamma, plain.dgamma), 1e-5) << "training " << training;
    EXPECT_LE(rel_err(blocked.dbeta, plain.dbeta), 1e-5) << "training " << training;
    EXPECT_LE(rel_err(blocked.mean, plain.mean), 1e-6) << "training " << training;
    EXPECT_LE(rel_err(blocked.var, plain.var), 1e-6) << "training " << training;
  }
}

TEST(BlockedLayout, BatchNormGivesTheSameBitsOnOneThreadAndTwo) {
  const int before = num_threads();
  set_num_threads(1);
  const BnResult one = run_bn(true, true, {19, 48, 6, 6});
  set_num_threads(2);
  const BnResult two = run_bn(true, true, {19, 48, 6, 6});
  set_num_threads(before);
  EXPECT_EQ(one.y, two.y);
  EXPECT_EQ(one.dx, two.dx);
  EXPECT_EQ(one.dgamma, two.dgamma);
}

TEST(BlockedLayout, ReluKeepsTheLayoutAndTakesAGradientInEither) {
  Rng rng(17);
  const Tensor x = random_tensor({2, 16, 3, 3}, rng), dy = random_tensor({2, 16, 3, 3}, rng);
  ReLU plain_relu, blocked_relu;
  const Tensor y = plain_relu.forward(x);
  const Tensor dx = plain_relu.backward(dy);
  const Tensor yb = blocked_relu.forward(to_layout(x, Layout::Blocked16));
  EXPECT_EQ(yb.layout(), Layout::Blocked16);
  EXPECT_EQ(plain_values(yb), y.to_vector());
  EXPECT_EQ(plain_values(blocked_relu.backward(dy)), dx.to_vector());  // a plain gradient
}

// A layer's output and input gradient for x and dy given plain, and given blocked.
template <class L>
void expect_same_in_both_layouts(L& plain_layer, L& blocked_layer, const Shape& in,
                                 const char* what) {
  Rng rng(19);
  const Tensor x = random_tensor(in, rng);
  const Tensor y = plain_layer.forward(x);
  const Tensor dy = random_tensor(y.shape(), rng);
  const Tensor dx = plain_layer.backward(dy);
  const Tensor yb = blocked_layer.forward(to_layout(x, Layout::Blocked16));
  const Tensor dyb = blockable16(dy) ? to_layout(dy, Layout::Blocked16) : dy;
  const Tensor dxb = blocked_layer.backward(dyb);
  EXPECT_EQ(dxb.layout(), Layout::Blocked16) << what;
  EXPECT_EQ(plain_values(yb), y.to_vector()) << what;
  EXPECT_EQ(plain_values(dxb), dx.to_vector()) << what;
}

TEST(BlockedLayout, ShortcutAndGlobalPoolingGiveThePlainLayoutsBits) {
  ShortcutPadA a(16, 32, 2), b(16, 32, 2);
  expect_same_in_both_layouts(a, b, {3, 16, 7, 7}, "ShortcutPadA 16->32, s2, odd size");
  ShortcutPadA c(32, 64, 2), d(32, 64, 2);
  expect_same_in_both_layouts(c, d, {2, 32, 8, 8}, "ShortcutPadA 32->64");
  GlobalAvgPool2d e, f;
  expect_same_in_both_layouts(e, f, {3, 48, 5, 4}, "GlobalAvgPool2d");
}

struct ConvResult {
  Layout y_layout;
  std::vector<float> y, dx, dw;
};

ConvResult run_conv(bool blocked_in, bool blocked_out, bool blocked_dy) {
  Rng init(21);
  Conv2d conv(16, 32, 3, 2, 1, false, init);
  conv.set_blocked_output(blocked_out);
  Rng data(23);
  Tensor x = random_tensor({4, 16, 9, 9}, data);
  if (blocked_in) x = to_layout(x, Layout::Blocked16);
  const Tensor y = conv.forward(x);
  Tensor dy = random_tensor(y.shape(), data);
  if (blocked_dy) dy = to_layout(dy, Layout::Blocked16);
  const Tensor dx = conv.backward(dy);
  EXPECT_EQ(dx.layout(), x.layout());
  return {y.layout(), plain_values(y), plain_values(dx), conv.weight().grad.to_vector()};
}

TEST(BlockedLayout, ConvolutionReadsAndWritesEitherLayoutWithTheSameResults) {
  if (!cpu::onednn_built()) GTEST_SKIP() << "this build has no oneDNN: convolutions stay NCHW";
  const ConvResult ref = run_conv(false, false, false);
  EXPECT_EQ(ref.y_layout, Layout::Plain);
  for (int mask = 1; mask < 8; ++mask) {
    const ConvResult r = run_conv(mask & 1, mask & 2, mask & 4);
    // The same oneDNN kernel computes in every case: only where the operands lie differs.
    EXPECT_EQ(r.y, ref.y) << "case " << mask;
    EXPECT_EQ(r.dx, ref.dx) << "case " << mask;
    EXPECT_EQ(r.dw, ref.dw) << "case " << mask;
  }
  // Where oneDNN computes y blocked (AVX-512), asking for it gives it without a reorder.
  const ConvResult asked = run_conv(false, true, false);
  Rng init(21);
  Conv2d probe(16, 32, 3, 2, 1, false, init);
  Rng data(23);
  probe.forward(random_tensor({4, 16, 9, 9}, data));
  std::printf("oneDNN forward implementation: %s, y %s\n", probe.onednn_impl().c_str(),
              asked.y_layout == Layout::Blocked16 ? "blocked" : "plain");
}

// One training step's loss and gradients of a model built with blocked activations
// against the same model with every convolution writing NCHW.
std::pair<float, std::vector<float>> resnet_step(const std::string& arch, bool blocked) {
  Rng rng(31);
  LayerPtr model = make_model(arch, 10, 3, rng);
  model->visit_layers([&](Layer& l) {
    if (auto* c = dynamic_cast<Conv2d*>(&l)) c->set_blocked_output(blocked && c->takes_blocked());
  });
  model->set_training(true);
  Rng data(37);
  const Tensor x = random_tensor({6, 3, 16, 16}, data);
  const Tensor logits = model->forward(x);
  EXPECT_TRUE(logits.is_plain());
  const Tensor dlogits = random_tensor(logits.shape(), data);
  const Tensor dx = model->backward(dlogits);
  EXPECT_TRUE(dx.is_plain());
  std::vector<float> grads;
  model->visit_params("", [&](const std::string&, Param& p) {
    const std::vector<float> g = p.grad.to_vector();
    grads.insert(grads.end(), g.begin(), g.end());
  });
  const std::vector<float> out = logits.to_vector(), weights = dlogits.to_vector();
  float sum = 0;
  for (size_t i = 0; i < out.size(); ++i) sum += out[i] * weights[i];
  return {sum, grads};
}

TEST(BlockedLayout, AResnetStepMatchesThePlainLayout) {
  for (const std::string arch : {"resnet20", "resnet18"}) {
    const auto plain = resnet_step(arch, false);
    const auto blocked = resnet_step(arch, true);
    EXPECT_NEAR(blocked.first, plain.first, 1e-4 * std::max(1.0f, std::abs(plain.first))) << arch;
    // Rounding differences grow through 19 BatchNorms of 6 images; a misplaced channel
    // would be off by the gradients themselves.
    EXPECT_LE(rel_err(blocked.second, plain.second), 1e-3) << arch;
  }
}

}  // namespace
}  // namespace st::test
