// The optimisers and gradient clipping on parameters of the emulated device (docs/GPU.md
// "The emulated device"): the CPU code runs as a task on the caller's stream, so values,
// optimiser state and clipped gradients equal the CPU run bit for bit.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "optim/clip.h"
#include "optim/make_optimizer.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

const Device kEmu = Device::emu(0);

// Three parameters of different kinds and sizes (one above the loops' OpenMP threshold),
// the same values on `device` as on the CPU.
std::vector<std::unique_ptr<Param>> make_params(Device device) {
  Rng rng(5);
  std::vector<std::unique_ptr<Param>> params;
  const std::vector<std::pair<Shape, ParamKind>> specs = {
      {{70000}, ParamKind::Weight}, {{7, 3}, ParamKind::Norm}, {{5}, ParamKind::Bias}};
  for (size_t i = 0; i < specs.size(); ++i) {
    auto p = std::make_unique<Param>();
    p->value = random_tensor(specs[i].first, rng).to(device);
    p->grad = Tensor::zeros(specs[i].first, DType::F32, device);
    p->kind = specs[i].second;
    p->name = std::to_string(i);
    params.push_back(std::move(p));
  }
  return params;
}

std::vector<Param*> pointers(const std::vector<std::unique_ptr<Param>>& params) {
  std::vector<Param*> out;
  for (const auto& p : params) out.push_back(p.get());
  return out;
}

void expect_equal(const Tensor& cpu, const Tensor& emu, const std::string& what) {
  ASSERT_EQ(emu.device(), kEmu) << what;
  EXPECT_EQ(cpu.to_vector(), emu.to_vector()) << what;
}

// Four steps of `name` with gradients scaled by 3 (so clipping at `max_norm` acts), the
// norms, values, gradients and optimiser state compared after each.
void compare_optimizer(const std::string& name, const OptimizerOptions& options, double max_norm) {
  auto cpu_params = make_params(Device::cpu()), emu_params = make_params(kEmu);
  auto cpu = make_optimizer(name, pointers(cpu_params), options);
  auto emu = make_optimizer(name, pointers(emu_params), options);
  Rng rng(6);
  for (int step = 0; step < 4; ++step) {
    const std::string at = name + " step " + std::to_string(step) + " ";
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      const Tensor g = random_tensor(cpu_params[i]->grad.shape(), rng, 3.0f);
      cpu_params[i]->grad.copy_from(g);
      emu_params[i]->grad.copy_from(g);
    }
    EXPECT_EQ(clip_grad_norm(pointers(emu_params), max_norm),
              clip_grad_norm(pointers(cpu_params), max_norm))
        << at;
    cpu->set_lr(cpu->lr() * 0.5f);
    emu->set_lr(emu->lr() * 0.5f);
    cpu->step();
    emu->step();
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      expect_equal(cpu_params[i]->grad, emu_params[i]->grad, at + "clipped gradient");
      expect_equal(cpu_params[i]->value, emu_params[i]->value,
                   at + "parameter " + cpu_params[i]->name);
    }
    const auto cpu_state = cpu->state_dict(), emu_state = emu->state_dict();
    ASSERT_EQ(cpu_state.size(), emu_state.size()) << at;
    for (const auto& [key, t] : cpu_state)
      EXPECT_EQ(t.to_vector(), emu_state.at(key).to_vector()) << at << key;
  }
}

TEST(EmuOptim, SgdWithNesterovMomentumMatchesTheCpu) {
  OptimizerOptions o;
  o.lr = 0.1f;
  o.momentum = 0.9f;
  o.nesterov = true;
  o.weight_decay = 1e-3f;
  o.no_decay_on_norm_and_bias = true;
  compare_optimizer("sgd", o, 50.0);
}

TEST(EmuOptim, PlainSgdMatchesTheCpu) {
  OptimizerOptions o;
  o.lr = 0.1f;
  compare_optimizer("sgd", o, 1e6);
}

TEST(EmuOptim, AdamWithAmsgradMatchesTheCpu) {
  OptimizerOptions o;
  o.weight_decay = 1e-2f;
  o.amsgrad = true;
  compare_optimizer("adam", o, 50.0);
}

TEST(EmuOptim, AdamWMatchesTheCpu) {
  compare_optimizer("adamw", {}, 50.0);
}

TEST(EmuOptim, GradNormOfEmptyAndOfDeviceGradients) {
  EXPECT_EQ(grad_norm({}), 0.0);
  auto cpu_params = make_params(Device::cpu()), emu_params = make_params(kEmu);
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    cpu_params[i]->grad.copy_from(cpu_params[i]->value);
    emu_params[i]->grad.copy_from(emu_params[i]->value);
  }
  const double norm = grad_norm(pointers(cpu_params));
  EXPECT_GT(norm, 0.0);
  EXPECT_EQ(grad_norm(pointers(emu_params)), norm);
}

}  // namespace
}  // namespace st::test
