// Every registered model runs forward and backward on a tiny batch of CIFAR-sized and
// Fashion-MNIST-sized input, and every parameter announces gradient-ready exactly once
// (what the bucketed reducer counts on).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/ops.h"
#include "models/registry.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

struct Case {
  std::string arch;
  int64_t channels, side;
};

void run(const Case& c) {
  SCOPED_TRACE(c.arch + " on " + std::to_string(c.channels) + "x" + std::to_string(c.side) + "x" +
               std::to_string(c.side));
  Rng rng(42);
  const int64_t classes = 7, batch = 2;
  LayerPtr model = make_model(c.arch, classes, c.channels, rng, c.side);
  std::vector<Param*> params = collect_params(*model);
  std::map<const Param*, int> ready;
  for (Param* p : params) {
    p->grad.zero();
    p->on_grad_ready = [&ready](Param& q) { ++ready[&q]; };
  }
  Tensor x = random_tensor({batch, c.channels, c.side, c.side}, rng);
  Tensor y = model->forward(x);
  ASSERT_EQ(y.shape(), Shape({batch, classes}));
  Tensor dx = model->backward(random_tensor(y.shape(), rng));
  EXPECT_EQ(dx.shape(), x.shape());
  int64_t nonzero = 0;
  for (Param* p : params) {
    EXPECT_EQ(ready[p], 1) << p->name << " must announce gradient-ready exactly once";
    const double s = sum_squares(p->grad);
    EXPECT_TRUE(std::isfinite(s)) << p->name;
    nonzero += s > 0.0;
    p->on_grad_ready = nullptr;
  }
  // Nearly every gradient is non-zero (a few ReLU-dead units at batch 2 are possible).
  EXPECT_GE(nonzero, static_cast<int64_t>(params.size()) * 9 / 10);
  // Evaluation mode uses running statistics and still produces logits.
  model->set_training(false);
  EXPECT_EQ(model->forward(x).shape(), Shape({batch, classes}));
}

TEST(ForwardBackward, CifarResNets) {
  run({"resnet20", 3, 32});
  run({"resnet20", 1, 28});  // 28 -> 14 -> 7: option A subsamples odd sizes like the conv
  run({"resnet32", 3, 16});
}

TEST(ForwardBackward, CifarResNet18) {
  run({"resnet18_cifar", 3, 16});
  run({"resnet18_cifar", 1, 28});
}

TEST(ForwardBackward, Vgg16) {
  run({"vgg16", 3, 32});
  run({"vgg16", 1, 28});
}

TEST(ForwardBackward, ImageNetResNets) {
  // Small spatial sizes keep this fast; the last stage sees 1x1 maps.
  run({"resnet18", 3, 32});
  run({"resnet50", 3, 32});
  run({"resnet34", 1, 28});
}

TEST(ForwardBackward, SmallCnn) {
  run({"small_cnn", 1, 28});
  run({"small_cnn", 3, 32});
}

TEST(ForwardBackward, VggShapesMatchReferencePoolingOn32) {
  // On 32x32 the final global max-pool equals the reference 2x2 max-pool of a 2x2 map,
  // so the flattened features are 512 wide exactly as in the reference classifier.
  Rng rng(1);
  LayerPtr m = make_model("vgg16", 10, 3, rng);
  Tensor y = m->forward(random_tensor({2, 3, 32, 32}, rng));
  EXPECT_EQ(y.shape(), Shape({2, 10}));
}

}  // namespace
}  // namespace st::test
