// A training step's forward + backward on a tiny random batch, checking the output
// shape, that every parameter announces gradient-ready exactly once (what the bucketed
// reducer counts on), finite non-zero gradients, and an evaluation-mode forward.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "core/ops.h"
#include "tests/gradcheck.h"

namespace st::test {

inline void check_training_step(Layer& model, int64_t channels, int64_t side, int64_t classes,
                                int64_t batch = 2) {
  SCOPED_TRACE(model.describe() + " on " + std::to_string(channels) + "x" + std::to_string(side) +
               "x" + std::to_string(side));
  Rng rng(42 + side);
  std::vector<Param*> params = collect_params(model);
  model.set_training(true);
  std::map<const Param*, int> ready;
  for (Param* p : params) {
    p->grad.zero();
    p->on_grad_ready = [&ready](Param& q) { ++ready[&q]; };
  }
  Tensor x = random_tensor({batch, channels, side, side}, rng);
  Tensor y = model.forward(x);
  ASSERT_EQ(y.shape(), Shape({batch, classes}));
  Tensor dx = model.backward(random_tensor(y.shape(), rng));
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
  model.set_training(false);
  EXPECT_EQ(model.forward(x).shape(), Shape({batch, classes}));
  model.set_training(true);
}

}  // namespace st::test
