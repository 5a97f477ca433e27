#include <gtest/gtest.h>

#include "layers/conv2d.h"
#include "layers/flat_params.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "tests/gradcheck.h"

namespace st::test {
namespace {

TEST(FlatParams, ViewsInReverseOrderAndGradientsLandInPlace) {
  Rng rng(3);
  Sequential model;
  model.add("conv", std::make_unique<Conv2d>(2, 3, 3, 1, 1, true, rng));
  model.add("flat", std::make_unique<Flatten>());
  model.add("fc", std::make_unique<Linear>(3 * 4 * 4, 5, true, rng));
  std::vector<float> before;
  for (Param* p : collect_params(model)) {
    std::vector<float> v = p->value.to_vector();
    before.insert(before.end(), v.begin(), v.end());
  }
  FlatParams flat(model, Device::cpu());
  const auto& ps = flat.params();
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0]->name, "conv.weight");
  EXPECT_EQ(ps[3]->name, "fc.bias");
  EXPECT_EQ(flat.numel(), 3 * 2 * 9 + 3 + 48 * 5 + 5);
  // Reverse order: the last parameter (fc.bias) comes first in the buffer.
  EXPECT_EQ(flat.offset(*ps[3]), 0);
  EXPECT_EQ(flat.offset(*ps[0]), flat.numel() - 54);
  // Values survive the move; every view shares the flat storage.
  size_t k = 0;
  for (Param* p : ps) {
    EXPECT_TRUE(p->value.shares_storage(flat.values()));
    EXPECT_TRUE(p->grad.shares_storage(flat.grads()));
    for (float v : p->value.to_vector()) EXPECT_EQ(v, before[k++]);
  }
  // Backward writes gradients straight into the flat buffer.
  Tensor x = Tensor::full({2, 2, 4, 4}, 0.5f);
  Tensor y = model.forward(x);
  model.backward(Tensor::full(y.shape(), 1.0f));
  const std::vector<float> g = flat.grads().to_vector();
  // fc.bias gradient = batch size for an all-ones upstream gradient.
  for (int j = 0; j < 5; ++j) EXPECT_FLOAT_EQ(g[j], 2.0f);
  flat.zero_grads();
  EXPECT_EQ(ps[0]->grad.to_vector()[0], 0.0f);
}

}  // namespace
}  // namespace st::test
