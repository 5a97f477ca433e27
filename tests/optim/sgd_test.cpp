// SGD against values computed by hand from torch.optim.SGD's update (PyTorch 1.13):
//   d = g + wd*p;  buf = d (first step) or momentum*buf + (1-dampening)*d;
//   d = nesterov ? d + momentum*buf : buf;  p -= lr*d.
// Every case: p0 = [1, -2], gradients [0.5, 1], [-1, 0.5], [0.25, -0.5], lr 0.1.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/rng.h"
#include "optim/sgd.h"

namespace st::test {
namespace {

const std::vector<std::vector<float>> kGrads = {{0.5f, 1.0f}, {-1.0f, 0.5f}, {0.25f, -0.5f}};

Param make_param(const std::string& name, ParamKind kind) {
  Param p;
  p.value = Tensor::from_vector({1.0f, -2.0f}, {2});
  p.grad = Tensor::zeros({2});
  p.kind = kind;
  p.name = name;
  return p;
}

// Runs `steps` steps and checks p after each against want[step].
void expect_trajectory(SgdOptions opt, const std::vector<std::vector<float>>& want,
                       ParamKind kind = ParamKind::Weight) {
  Param p = make_param("w", kind);
  Sgd sgd({&p}, opt);
  for (size_t s = 0; s < want.size(); ++s) {
    p.grad.copy_from(Tensor::from_vector(kGrads[s], {2}));
    sgd.step();
    std::vector<float> got = p.value.to_vector();
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(got[i], want[s][i], 1e-6) << "step " << s + 1;
  }
}

TEST(Sgd, Plain) {
  SgdOptions o;
  o.lr = 0.1f;
  expect_trajectory(o, {{0.95f, -2.1f}, {1.05f, -2.15f}, {1.025f, -2.1f}});
}

TEST(Sgd, Momentum) {
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  // buf: [0.5, 1] -> [-0.55, 1.4] -> [-0.245, 0.76]
  expect_trajectory(o, {{0.95f, -2.1f}, {1.005f, -2.24f}, {1.0295f, -2.316f}});
}

TEST(Sgd, Nesterov) {
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.nesterov = true;
  // d = g + 0.9*buf: [0.95, 1.9] -> [-1.495, 1.76] -> [0.0295, 0.184]
  expect_trajectory(o, {{0.905f, -2.19f}, {1.0545f, -2.366f}, {1.05155f, -2.3844f}});
}

TEST(Sgd, Dampening) {
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.dampening = 0.5f;
  // First buf is g undamped; then buf = 0.9*[0.5, 1] + 0.5*[-1, 0.5] = [-0.05, 1.15].
  expect_trajectory(o, {{0.95f, -2.1f}, {0.955f, -2.215f}});
}

TEST(Sgd, WeightDecayWithMomentum) {
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.weight_decay = 0.01f;
  // d1 = [0.51, 0.98]; d2 = [-0.99051, 0.47902]; buf2 = [-0.53151, 1.36102]
  expect_trajectory(o, {{0.949f, -2.098f}, {1.002151f, -2.234102f}});
}

TEST(Sgd, WeightDecayWithoutMomentum) {
  SgdOptions o;
  o.lr = 0.1f;
  o.weight_decay = 0.01f;
  expect_trajectory(o, {{0.949f, -2.098f}, {1.048051f, -2.145902f}});
}

TEST(Sgd, NoWeightDecayOnNormAndBias) {
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.weight_decay = 0.01f;
  o.no_decay_on_norm_and_bias = true;
  const std::vector<std::vector<float>> momentum_only = {{0.95f, -2.1f}, {1.005f, -2.24f}};
  expect_trajectory(o, momentum_only, ParamKind::Norm);
  expect_trajectory(o, momentum_only, ParamKind::Bias);
  expect_trajectory(o, {{0.949f, -2.098f}, {1.002151f, -2.234102f}}, ParamKind::Weight);
  // Without the option, PyTorch's default: decay on everything.
  o.no_decay_on_norm_and_bias = false;
  expect_trajectory(o, {{0.949f, -2.098f}, {1.002151f, -2.234102f}}, ParamKind::Norm);
}

TEST(Sgd, LearningRateChangesBetweenSteps) {
  Param p = make_param("w", ParamKind::Weight);
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  Sgd sgd({&p}, o);
  p.grad.copy_from(Tensor::from_vector(kGrads[0], {2}));
  sgd.step();
  sgd.set_lr(0.01f);
  p.grad.copy_from(Tensor::from_vector(kGrads[1], {2}));
  sgd.step();  // buf [-0.55, 1.4] at lr 0.01
  std::vector<float> got = p.value.to_vector();
  EXPECT_NEAR(got[0], 0.95f + 0.0055f, 1e-6);
  EXPECT_NEAR(got[1], -2.1f - 0.014f, 1e-6);
}

TEST(Sgd, StateDictResumesExactly) {
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.nesterov = true;
  o.weight_decay = 1e-4f;
  Param a = make_param("layer.weight", ParamKind::Weight);
  Sgd full({&a}, o);
  for (const auto& g : kGrads) {
    a.grad.copy_from(Tensor::from_vector(g, {2}));
    full.step();
  }
  // Same run split after one step: state and value copied into a fresh optimiser.
  Param b = make_param("layer.weight", ParamKind::Weight);
  Sgd first({&b}, o);
  EXPECT_TRUE(first.state_dict().empty());  // no buffer before the first step
  b.grad.copy_from(Tensor::from_vector(kGrads[0], {2}));
  first.step();
  std::map<std::string, Tensor> saved;
  for (const auto& [k, v] : first.state_dict()) saved.emplace(k, v.clone());
  ASSERT_EQ(saved.size(), 1u);
  ASSERT_EQ(saved.begin()->first, "layer.weight.momentum_buffer");
  EXPECT_NEAR(saved.begin()->second.to_vector()[0], 0.5001f, 1e-7);  // g + wd * p
  EXPECT_NEAR(saved.begin()->second.to_vector()[1], 0.9998f, 1e-7);
  Param c = make_param("layer.weight", ParamKind::Weight);
  c.value.copy_from(b.value);
  Sgd resumed({&c}, o);
  resumed.load_state_dict(saved);
  for (size_t s = 1; s < kGrads.size(); ++s) {
    c.grad.copy_from(Tensor::from_vector(kGrads[s], {2}));
    resumed.step();
  }
  EXPECT_EQ(c.value.to_vector(), a.value.to_vector());  // bit for bit
}

TEST(Sgd, StateDictErrors) {
  Param p = make_param("w", ParamKind::Weight);
  SgdOptions o;
  o.momentum = 0.9f;
  Sgd sgd({&p}, o);
  EXPECT_THROW(sgd.load_state_dict({{"v.momentum_buffer", Tensor::zeros({2})}}), Error);
  EXPECT_THROW(sgd.load_state_dict({{"w.momentum_buffer", Tensor::zeros({3})}}), Error);
  sgd.load_state_dict({{"w.momentum_buffer", Tensor::zeros({2})}});
  EXPECT_EQ(sgd.state_dict().size(), 1u);
}

TEST(Sgd, StateNamingSomeButNotAllBuffersIsRefused) {
  Param w = make_param("w", ParamKind::Weight), b = make_param("b", ParamKind::Bias);
  SgdOptions o;
  o.momentum = 0.9f;
  Sgd sgd({&w, &b}, o);
  try {
    sgd.load_state_dict({{"w.momentum_buffer", Tensor::zeros({2})}});
    ADD_FAILURE() << "a missing momentum buffer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'b.momentum_buffer' is missing"), std::string::npos)
        << e.what();
  }
  sgd.load_state_dict({});  // before the first step: no buffers at all
  EXPECT_TRUE(sgd.state_dict().empty());
}

TEST(Sgd, BadOptionsThrow) {
  Param p = make_param("w", ParamKind::Weight);
  SgdOptions o;
  o.nesterov = true;  // needs momentum
  EXPECT_THROW(Sgd({&p}, o), Error);
  o = SgdOptions{};
  o.lr = -1.0f;
  EXPECT_THROW(Sgd({&p}, o), Error);
}

// A parameter large enough for the parallel loop agrees with a scalar double reference.
TEST(Sgd, LargeParameterMatchesReference) {
  const int64_t n = 300001;
  Rng rng(9);
  Param p;
  p.name = "big";
  p.value = Tensor::empty({n});
  p.grad = Tensor::empty({n});
  std::vector<double> ref_p(n), ref_buf(n);
  for (int64_t i = 0; i < n; ++i) {
    p.value.f32()[i] = rng.uniform() - 0.5f;
    ref_p[i] = p.value.f32()[i];
  }
  SgdOptions o;
  o.lr = 0.05f;
  o.momentum = 0.9f;
  o.nesterov = true;
  o.weight_decay = 5e-4f;
  Sgd sgd({&p}, o);
  for (int s = 0; s < 3; ++s) {
    for (int64_t i = 0; i < n; ++i) p.grad.f32()[i] = rng.uniform() - 0.5f;
    sgd.step();
    for (int64_t i = 0; i < n; ++i) {
      const double d = p.grad.f32()[i] + 5e-4 * ref_p[i];
      ref_buf[i] = s == 0 ? d : 0.9 * ref_buf[i] + d;
      ref_p[i] -= 0.05 * (d + 0.9 * ref_buf[i]);
    }
  }
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i)
    max_err = std::max(max_err, std::abs(ref_p[i] - p.value.f32()[i]));
  EXPECT_LT(max_err, 1e-6);
}

TEST(Sgd, ZeroGrad) {
  Param p = make_param("w", ParamKind::Weight);
  p.grad.fill(3.0f);
  Sgd sgd({&p}, SgdOptions{});
  sgd.zero_grad();
  EXPECT_EQ(p.grad.to_vector(), std::vector<float>({0.0f, 0.0f}));
}

}  // namespace
}  // namespace st::test
