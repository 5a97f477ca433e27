// The --arch registry: names, errors, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "core/error.h"
#include "core/ops.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/sequential.h"
#include "models/model_init.h"
#include "models/registry.h"

namespace st::test {
namespace {

TEST(Registry, ListsEveryArchitecture) {
  const std::vector<std::string> names = model_names();
  for (const char* want :
       {"resnet20", "resnet32", "resnet44", "resnet56", "resnet110", "resnet18_cifar", "googlenet",
        "senet18", "se_resnet18", "vgg16", "resnet18", "resnet34", "resnet50", "small_cnn"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EXPECT_EQ(model_archs().size(), names.size());
  EXPECT_EQ(arch_info("resnet50").image_size, 224);
  EXPECT_EQ(arch_info("resnet20").image_size, 32);
  EXPECT_EQ(arch_info("small_cnn").image_size, 28);
}

TEST(Registry, UnknownArchListsValidOnes) {
  Rng rng(0);
  try {
    make_model("resnet21", 10, 3, rng);
    FAIL() << "expected st::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown --arch 'resnet21'"), std::string::npos) << msg;
    for (const std::string& name : model_names())
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  EXPECT_THROW(arch_info(""), Error);
}

TEST(Registry, BadArgumentsThrow) {
  Rng rng(0);
  EXPECT_THROW(make_model("resnet20", 0, 3, rng), Error);
  EXPECT_THROW(make_model("resnet20", 10, 0, rng), Error);
  EXPECT_THROW(make_model("small_cnn", 10, 1, rng, -1), Error);
}

TEST(Registry, SameSeedSameWeights) {
  Rng a(5), b(5), c(6);
  LayerPtr ma = make_model("resnet20", 10, 3, a);
  LayerPtr mb = make_model("resnet20", 10, 3, b);
  LayerPtr mc = make_model("resnet20", 10, 3, c);
  std::vector<Param*> pa = collect_params(*ma), pb = collect_params(*mb), pc = collect_params(*mc);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i]->value.to_vector(), pb[i]->value.to_vector()) << pa[i]->name;
  EXPECT_NE(pa[0]->value.to_vector(), pc[0]->value.to_vector());
}

// kaiming_normal (He et al. 2015): std sqrt(2 / fan), fan from the weight's shape.
TEST(ModelInit, KaimingNormalScale) {
  for (FanMode mode : {FanMode::FanIn, FanMode::FanOut}) {
    Param w;
    w.value = Tensor::zeros({64, 32, 3, 3});
    Rng rng(8);
    kaiming_normal(w, mode, rng);
    const double fan = mode == FanMode::FanIn ? 32 * 9 : 64 * 9;
    const double std = std::sqrt(sum_squares(w.value) / static_cast<double>(w.value.numel()));
    EXPECT_NEAR(std, std::sqrt(2.0 / fan), 0.02 * std::sqrt(2.0 / fan));
  }
}

// A model registered from outside the zoo is built, listed and named like a built-in one;
// a second row of the same name, an empty name or a missing factory are errors.
TEST(Registry, RegisteredModelIsBuiltLikeTheBuiltInOnes) {
  int64_t seen_size = -1;
  register_model({"registry_test_linear", "flatten + linear (a test row)", 12},
                 [&seen_size](int64_t k, int64_t c, int64_t s, Rng& rng) -> LayerPtr {
                   seen_size = s;
                   auto net = std::make_unique<Sequential>();
                   net->add("flatten", std::make_unique<Flatten>());
                   net->add("fc", std::make_unique<Linear>(c * s * s, k, true, rng));
                   return net;
                 });
  const std::vector<std::string> names = model_names();
  EXPECT_EQ(names.back(), "registry_test_linear");
  EXPECT_EQ(model_archs().back().name, "registry_test_linear");
  EXPECT_EQ(model_archs().size(), names.size());
  EXPECT_EQ(arch_info("registry_test_linear").image_size, 12);
  Rng rng(3);
  LayerPtr m = make_model("registry_test_linear", 5, 2, rng);
  EXPECT_EQ(seen_size, 12);  // the row's own size when the caller gives none
  int64_t params = 0;
  m->visit_params("", [&](const std::string&, Param& p) { params += p.value.numel(); });
  EXPECT_EQ(params, 2 * 12 * 12 * 5 + 5);
  make_model("registry_test_linear", 5, 2, rng, 4);
  EXPECT_EQ(seen_size, 4);

  const auto error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const ModelFactory any = [](int64_t, int64_t, int64_t, Rng&) -> LayerPtr { return nullptr; };
  EXPECT_NE(error_of([&] {
              register_model({"resnet20", "again", 32}, any);
            }).find("'resnet20'): an architecture of that name exists"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              register_model({"", "nameless", 32}, any);
            }).find("needs a name"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              register_model({"no_factory", "", 32}, nullptr);
            }).find("no factory"),
            std::string::npos);
  EXPECT_EQ(model_names().size(), names.size());  // the refused rows were not added
}

}  // namespace
}  // namespace st::test
