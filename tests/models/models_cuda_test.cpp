// GPU-vs-CPU for the models' own layers (ShortcutPadA, GlobalMaxPool2d) and whole steps
// of ResNet-20, GoogLeNet (Concat), SENet-18 and SE-ResNet-18 (SqueezeExcite): two identically
// seeded copies, one on the GPU, same input and upstream gradient; outputs and gradients must
// agree. Skips without a device.
#include <gtest/gtest.h>

#include <cmath>

#include "models/global_max_pool.h"
#include "models/registry.h"
#include "models/shortcut_pad.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

const Device kGpu = Device::cuda(0);

void expect_close(const Tensor& cpu, const Tensor& gpu, double tol, const std::string& what) {
  ASSERT_EQ(cpu.shape(), gpu.shape()) << what;
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  const std::vector<float> a = cpu.to_vector(), b = gpu.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1.0 + std::abs(a[i]))) << what << " element " << i;
}

// Forward and backward of `cpu` and `gpu` (same weights) on the same data.
void compare(Layer& cpu, Layer& gpu, const Shape& in, double tol) {
  gpu.to(kGpu);
  Rng rng(5);
  const Tensor x = random_tensor(in, rng);
  const Tensor yc = cpu.forward(x);
  const Tensor yg = gpu.forward(x.to(kGpu));
  expect_close(yc, yg, tol, cpu.describe() + " output");
  const Tensor dy = random_tensor(yc.shape(), rng);
  expect_close(cpu.backward(dy), gpu.backward(dy.to(kGpu)), tol, cpu.describe() + " dx");
  std::vector<Param*> pc = collect_params(cpu), pg = collect_params(gpu);
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t i = 0; i < pc.size(); ++i) expect_close(pc[i]->grad, pg[i]->grad, tol, pc[i]->name);
}

TEST(ModelsCuda, ShortcutPadA) {
  ST_REQUIRE_CUDA_DEVICE();
  ShortcutPadA cpu(3, 8, 2), gpu(3, 8, 2);
  compare(cpu, gpu, {2, 3, 7, 7}, 0.0);  // a pure selection: exact
}

TEST(ModelsCuda, GlobalMaxPool2d) {
  ST_REQUIRE_CUDA_DEVICE();
  GlobalMaxPool2d cpu, gpu;
  compare(cpu, gpu, {3, 5, 4, 3}, 0.0);
}

TEST(ModelsCuda, ResNet20Step) {
  ST_REQUIRE_CUDA_DEVICE();
  Rng a(1), b(1);
  LayerPtr cpu = make_model("resnet20", 10, 3, a);
  LayerPtr gpu = make_model("resnet20", 10, 3, b);
  compare(*cpu, *gpu, {4, 3, 32, 32}, 2e-3);
}

// The architectures whose containers join or rescale channels (core/channel_ops.h).
void compare_arch(const std::string& arch, const Shape& in) {
  Rng a(1), b(1);
  LayerPtr cpu = make_model(arch, 10, 3, a);
  LayerPtr gpu = make_model(arch, 10, 3, b);
  compare(*cpu, *gpu, in, 2e-3);
}

TEST(ModelsCuda, GoogLeNetStep) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_arch("googlenet", {2, 3, 32, 32});
}

TEST(ModelsCuda, SENet18Step) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_arch("senet18", {2, 3, 32, 32});
}

TEST(ModelsCuda, SEResNet18Step) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_arch("se_resnet18", {2, 3, 16, 16});
}

// cuDNN's rectangular filters (1x7, 7x1, 1x3, 3x1) and the InceptionC pairs; dropout draws
// the same Philox masks on both devices.
TEST(ModelsCuda, InceptionV4Step) {
  ST_REQUIRE_CUDA_DEVICE();
  compare_arch("inception_v4", {2, 3, 32, 32});
}

}  // namespace
}  // namespace st::test
