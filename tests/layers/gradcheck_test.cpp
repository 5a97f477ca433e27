// Finite-difference gradient checks: GradCheck.<case> for every row of the layer case
// table (tests/layers/layer_cases.h) that has gradient-check options, each a ctest entry;
// the loss, which is not a Layer, checks its scalar gradient here.
#include "tests/gradcheck.h"
#include <map>
#include <string>

#include "layers/softmax_cross_entropy.h"
#include "tests/layers/layer_cases.h"

namespace st::test {
namespace {

void check_case_gradients(const LayerCase& c) {
  for (CpuConvAlgo algo : conv_algos_for(c)) {
    SCOPED_TRACE(conv_algo_name(algo));
    LayerPtr layer = c.make();
    layer->set_training(c.training);
    set_conv_algo(*layer, algo);
    Rng rng(c.gradcheck_seed);
    check_layer_gradients(*layer, c.input(rng), *c.gradcheck);
  }
}

[[maybe_unused]] const bool kRegistered = [] {
  register_case_tests(
      "GradCheck", [](const LayerCase& c) { return c.gradcheck.has_value(); },
      check_case_gradients);
  return true;
}();

// The language model's rows: with tying the decoder borrows encoder.weight, which appears
// once (its gradient check counts one gradient-ready announcement for both shares).
TEST(LayerCases, LanguageModelTyingSharesTheEncoderWeight) {
  for (const LayerCase& c : layer_cases()) {
    const bool tied = c.name == "LstmLanguageModelTied";
    if (!tied && c.name != "LstmLanguageModelUntied") continue;
    LayerPtr lm = c.make();
    std::map<std::string, int> names;
    for (Param* p : collect_params(*lm)) ++names[p->name];
    EXPECT_EQ(names.count("encoder.weight"), 1u) << c.name;
    EXPECT_EQ(names.count("decoder.weight"), tied ? 0u : 1u) << c.name;
    EXPECT_EQ(names.count("decoder.bias"), 1u) << c.name;
    EXPECT_EQ(names.count("rnn.weight_hh_l1"), 1u) << c.name;
  }
}

Tensor input(const Shape& s, uint64_t seed = 7) {
  Rng rng(seed);
  return random_tensor(s, rng);
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  Tensor logits = input({6, 5});
  Tensor labels = Tensor::from_vector_i32({0, 4, 2, 2, 1, 3}, {6});
  SoftmaxCrossEntropy loss;
  loss.forward(logits, labels);
  Tensor grad = loss.backward();
  check_scalar_gradient(
      [&](const Tensor& z) {
        SoftmaxCrossEntropy l;
        return static_cast<double>(l.forward(z, labels));
      },
      logits, grad, "SoftmaxCrossEntropy logits");
}

}  // namespace
}  // namespace st::test
