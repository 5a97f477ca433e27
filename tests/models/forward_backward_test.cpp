// Every registered model runs forward and backward on a tiny batch of CIFAR-sized and
// Fashion-MNIST-sized input, and every parameter announces gradient-ready exactly once
// (what the bucketed reducer counts on). One build per model; ImageNet models run on
// 32x32 or 28x28 input so the suite stays fast.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/ops.h"
#include "models/registry.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

constexpr int64_t kClasses = 7, kBatch = 2;

// Builds `arch` once and runs a training step's forward + backward at each side.
void run(const std::string& arch, int64_t channels, std::initializer_list<int64_t> sides) {
  Rng rng(42);
  LayerPtr model = make_model(arch, kClasses, channels, rng, *sides.begin());
  std::vector<Param*> params = collect_params(*model);
  for (int64_t side : sides) {
    SCOPED_TRACE(arch + " on " + std::to_string(channels) + "x" + std::to_string(side) + "x" +
                 std::to_string(side));
    model->set_training(true);
    std::map<const Param*, int> ready;
    for (Param* p : params) {
      p->grad.zero();
      p->on_grad_ready = [&ready](Param& q) { ++ready[&q]; };
    }
    Tensor x = random_tensor({kBatch, channels, side, side}, rng);
    Tensor y = model->forward(x);
    ASSERT_EQ(y.shape(), Shape({kBatch, kClasses}));
    Tensor dx = model->backward(random_tensor(y.shape(), rng));
    EXPECT_EQ(dx.shape(), x.shape());
    size_t nonzero = 0;
    for (Param* p : params) {
      EXPECT_EQ(ready[p], 1) << p->name << " must announce gradient-ready exactly once";
      const double s = sum_squares(p->grad);
      EXPECT_TRUE(std::isfinite(s)) << p->name;
      nonzero += s > 0.0;
      p->on_grad_ready = nullptr;
    }
    // Nearly every gradient is non-zero (a few ReLU-dead units at batch 2 are possible).
    EXPECT_GE(nonzero, params.size() * 9 / 10);
    // Evaluation mode uses running statistics and still produces logits.
    model->set_training(false);
    EXPECT_EQ(model->forward(x).shape(), Shape({kBatch, kClasses}));
  }
}

TEST(ForwardBackward, CifarResNet20) {
  run("resnet20", 3, {32, 28});  // 28 -> 14 -> 7: option A subsamples odd sizes as the conv
  run("resnet20", 1, {28});
}

// 12 -> 12, 6, 3, 2: odd sizes through the stride-2 projections, at a fraction of the cost.
TEST(ForwardBackward, CifarResNet18) {
  run("resnet18_cifar", 1, {12});
}

// On 32x32 the final global max-pool equals the reference 2x2 max-pool of a 2x2 map; on
// 28x28 (a 1x1 map there) it lets Fashion-MNIST through.
TEST(ForwardBackward, Vgg16) {
  run("vgg16", 3, {32, 28});
}

TEST(ForwardBackward, ImageNetResNet18) {
  run("resnet18", 1, {28});
}

TEST(ForwardBackward, ImageNetResNet50) {
  run("resnet50", 3, {32});
}

TEST(ForwardBackward, SmallCnn) {
  run("small_cnn", 1, {28});
  run("small_cnn", 3, {32});
}

}  // namespace
}  // namespace st::test
