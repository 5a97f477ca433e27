// SGD on the GPU follows the same per-element formula as the CPU: several steps with
// momentum, Nesterov and weight decay (skipped on a Norm parameter) must agree.
#include <gtest/gtest.h>

#include <cmath>

#include "optim/sgd.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

TEST(SgdCuda, MatchesCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  const Device gpu = Device::cuda(0);
  Rng rng(3);
  Param cw, cn, gw, gn;
  cw.name = gw.name = "conv.weight";
  cn.name = gn.name = "bn.weight";
  cn.kind = gn.kind = ParamKind::Norm;
  cw.value = random_tensor({1000, 37}, rng);
  cn.value = random_tensor({64}, rng);
  for (auto [c, g] : {std::pair{&cw, &gw}, std::pair{&cn, &gn}}) {
    c->grad = Tensor::zeros(c->value.shape());
    g->value = c->value.to(gpu);
    g->grad = Tensor::zeros(c->value.shape(), DType::F32, gpu);
  }
  SgdOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.nesterov = true;
  o.weight_decay = 5e-4f;
  o.no_decay_on_norm_and_bias = true;
  Sgd cpu_opt({&cw, &cn}, o), gpu_opt({&gw, &gn}, o);
  for (int step = 0; step < 3; ++step) {
    for (auto [c, g] : {std::pair{&cw, &gw}, std::pair{&cn, &gn}}) {
      c->grad.copy_from(random_tensor(c->value.shape(), rng));
      g->grad.copy_from(c->grad);
    }
    cpu_opt.step();
    gpu_opt.step();
  }
  for (auto [c, g] : {std::pair{&cw, &gw}, std::pair{&cn, &gn}}) {
    const std::vector<float> a = c->value.to_vector(), b = g->value.to_vector();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << c->name << " " << i;
  }
  EXPECT_EQ(gpu_opt.state_dict().size(), 2u);
  EXPECT_TRUE(gpu_opt.state_dict().at("conv.weight.momentum_buffer").device().is_cuda());
}

}  // namespace
}  // namespace st::test
