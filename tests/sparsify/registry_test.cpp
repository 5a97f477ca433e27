// The sparsifier registry: each method's row is the one declaration that the factory, --sp
// validation, the listing and the JSON all read.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sparsify/fft.h"
#include "sparsify/micro.h"
#include "sparsify/quantizers.h"
#include "sparsify/registry.h"
#include "sparsify/sidco.h"
#include "sparsify/vgc.h"

namespace st::test {
namespace {

// The message of the Error that `build` throws ("" if none).
std::string thrown_by(const std::function<void()>& build) {
  try {
    build();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The message of the Error that building `name` with `params` throws ("" if none).
std::string error_of(const SparsifierInfo& info, std::map<std::string, std::string> params) {
  SparsifierOptions o;
  o.params = std::move(params);
  return thrown_by([&] { info.build(o); });
}

std::string error_of(const std::string& name, std::map<std::string, std::string> params) {
  return error_of(sparsifier_info(name), std::move(params));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(SparsifierRegistry, JsonListsEveryMethodWithItsPatternAndKeys) {
  const auto json = nlohmann::json::parse(sparsifiers_json());
  const auto& list = json.at("sparsifiers");
  ASSERT_EQ(list.size(), sparsifiers().size());
  ASSERT_GE(list.size(), 19u);
  for (size_t i = 0; i < list.size(); ++i) {
    const SparsifierInfo& info = sparsifiers()[i];
    const auto& m = list[i];
    SCOPED_TRACE(info.name);
    const SparsifierPtr made = make_sparsifier(info.name, {});
    EXPECT_EQ(m.at("name"), info.name);
    EXPECT_EQ(made->name(), info.name);
    EXPECT_EQ(m.at("pattern"), pattern_name(made->pattern()));
    EXPECT_EQ(m.at("partitioned"), made->partitioned());
    // Per-sample squared gradients come from the CPU layers' code (CPU and emu only).
    const std::vector<std::string> devices = info.side_inputs.sq_grads
                                                 ? std::vector<std::string>{"cpu", "emu"}
                                                 : std::vector<std::string>{"cpu", "cuda", "emu"};
    EXPECT_EQ(m.at("device").get<std::vector<std::string>>(), devices);
    EXPECT_FALSE(m.at("summary").get<std::string>().empty());
    EXPECT_EQ(m.at("paper").is_null(), info.name == "dense");
    ASSERT_EQ(m.at("keys").size(), info.keys.size());
    for (size_t k = 0; k < info.keys.size(); ++k) {
      EXPECT_EQ(m.at("keys")[k].at("name"), info.keys[k].name);
      EXPECT_EQ(m.at("keys")[k].at("default"), info.keys[k].default_value);
      EXPECT_FALSE(m.at("keys")[k].at("meaning").get<std::string>().empty());
    }
  }
  EXPECT_EQ(list[3].at("name"), "micro");
  EXPECT_EQ(list[3].at("pattern"), "union-allreduce");
  EXPECT_EQ(list[3].at("keys")[0].at("default_text"), "1.1");
}

TEST(SparsifierRegistry, EveryDefaultIsAllowedAndReadsBack) {
  for (const SparsifierInfo& info : sparsifiers()) {
    std::map<std::string, std::string> typed;
    for (const SpKey& k : info.keys) typed[k.name] = k.default_text();
    const SpValues v(info.name, info.keys, typed);
    for (const SpKey& k : info.keys) EXPECT_EQ(v.get(k.name), k.default_value) << k.name;
    EXPECT_EQ(error_of(info, typed), "") << info.name;
  }
}

// One added key reaches the listing, the JSON, validation and the factory at once.
TEST(SparsifierRegistry, AddingAKeyReachesListingJsonAndValidation) {
  SparsifierInfo row = sparsifier_info("micro");
  auto seen = std::make_shared<double>(-1);
  row.keys.push_back(real("extra", 0.5, "[0, 1]", "a key only this test declares"));
  row.make = [seen](const SpValues& v) -> SparsifierPtr {
    *seen = v.get("extra");
    return std::make_unique<Micro>(Micro::rule_from(v));
  };

  const std::string before = sparsifiers_listing({sparsifier_info("micro")});
  const std::string after = sparsifiers_listing({row});
  EXPECT_FALSE(has(before, "extra"));
  EXPECT_TRUE(has(after, "--sp extra=0.5")) << after;
  EXPECT_TRUE(has(after, "a key only this test declares; a number in [0, 1]")) << after;

  const auto key = nlohmann::json::parse(sparsifiers_json({row}))["sparsifiers"][0]["keys"].back();
  EXPECT_EQ(key.at("name"), "extra");
  EXPECT_EQ(key.at("default"), 0.5);
  EXPECT_EQ(key.at("min"), 0.0);
  EXPECT_EQ(key.at("max"), 1.0);
  EXPECT_EQ(key.at("integer"), false);
  EXPECT_EQ(key.at("meaning"), "a key only this test declares");

  EXPECT_EQ(error_of(row, {}), "");
  EXPECT_EQ(*seen, 0.5) << "the default comes from the declaration";
  EXPECT_EQ(error_of(row, {{"extra", "0.25"}}), "");
  EXPECT_EQ(*seen, 0.25);
  const std::string bad = error_of(row, {{"extra", "2"}});
  EXPECT_TRUE(has(bad, "--sparsifier micro") && has(bad, "extra=2") && has(bad, "[0, 1]")) << bad;
  const std::string unknown = error_of("micro", {{"extra", "0.25"}});
  EXPECT_TRUE(has(unknown, "extra: not a parameter of --sparsifier micro")) << unknown;
  EXPECT_TRUE(has(unknown, "(it takes: hi, lo, up, mid, down)")) << unknown;
}

TEST(SparsifierRegistry, RangeErrorsNameMethodKeyValueAndRange) {
  const struct {
    const char* method;
    const char* key;
    const char* value;
    const char* allowed;
  } cases[] = {
      {"exdyna", "align", "2.5", "an integer in [1, 2^53]"},
      {"exdyna", "blocks", "1e30", "an integer in [1, 2^53]"},
      {"exdyna", "fill", "maybe", "0 or 1"},
      {"sidco-e", "band", "1", "a number in (0, 1)"},
      {"sidco-e", "adapt", "2", "-1, 0, 1 or auto"},
      {"fft", "bits", "30", "an integer in [2, 24]"},
      {"dgc", "sample", "nan", "a number in (0, 1]"},
      {"terngrad", "clip", "-1", "a number in [0, inf)"},
      {"qsgd", "levels", "1e300", "an integer in [1, 1048576]"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.method, {{c.key, c.value}});
    SCOPED_TRACE(msg);
    EXPECT_TRUE(has(msg, std::string("--sparsifier ") + c.method));
    EXPECT_TRUE(has(msg, std::string("--sp ") + c.key + "=" + c.value));
    EXPECT_TRUE(has(msg, std::string(c.key) + " takes " + c.allowed));
    EXPECT_FALSE(has(msg, "\n"));
  }
  EXPECT_EQ(error_of("dgc", {{"mask", "off"}, {"momentum", "0.9"}}), "");
  EXPECT_EQ(error_of("sidco-gp", {{"adapt", "auto"}, {"stages", "3"}}), "");
  EXPECT_TRUE(has(error_of("topk", {{"k", "1"}}), "(it takes none)"));
}

TEST(SparsifierRegistry, RangesParseAndPrintInIntervalNotation) {
  const SpRange r = SpRange::parse("(0, 1]");
  EXPECT_FALSE(r.contains(0));
  EXPECT_TRUE(r.contains(1));
  EXPECT_EQ(r.str(), "(0, 1]");
  EXPECT_EQ(SpRange::parse("[1,inf)").str(), "[1, inf)");
  EXPECT_THROW(SpRange::parse("[0 1]"), Error);
  EXPECT_THROW(SpRange::parse("[0, inf]"), Error);
  EXPECT_THROW(SpRange::parse("(1, 0)"), Error);
  EXPECT_EQ(number_text(1.00125), "1.00125");
  EXPECT_EQ(flag("f", true, "").default_text(), "1");
}

// Per-rank state and side inputs are properties of the row, and the JSON and the listing
// print them: VGC, SAGE and DGC keep rank-local rule state, only VGC reads squared gradients.
TEST(SparsifierRegistry, RowsDeclarePerRankStateAndSideInputs) {
  const auto list = nlohmann::json::parse(sparsifiers_json()).at("sparsifiers");
  ASSERT_EQ(list.size(), sparsifiers().size());
  for (size_t i = 0; i < list.size(); ++i) {
    const SparsifierInfo& info = sparsifiers()[i];
    SCOPED_TRACE(info.name);
    const bool per_rank = info.name == "vgc" || info.name == "sage" || info.name == "dgc";
    EXPECT_EQ(info.per_rank_state.empty(), !per_rank);
    EXPECT_EQ(list[i].at("per_rank_state").is_null(), !per_rank);
    if (per_rank) {
      EXPECT_EQ(list[i].at("per_rank_state"), info.per_rank_state);
    }
    EXPECT_EQ(info.side_inputs.sq_grads, info.name == "vgc");
    EXPECT_EQ(sparsifier_uses_sq_grads(info.name), info.name == "vgc");
    EXPECT_EQ(
        list[i].at("side_inputs").get<std::vector<std::string>>(),
        info.name == "vgc" ? std::vector<std::string>{"sq_grads"} : std::vector<std::string>{});
  }
  const std::string vgc = sparsifiers_listing({sparsifier_info("vgc")});
  EXPECT_TRUE(has(vgc, "per-rank state: a variance accumulator per element on each rank")) << vgc;
  EXPECT_TRUE(has(vgc, "side input: per-sample squared-gradient sums (sq_grads)")) << vgc;
  const std::string topk = sparsifiers_listing({sparsifier_info("topk")});
  EXPECT_FALSE(has(topk, "per-rank state") || has(topk, "side input")) << topk;
  EXPECT_THROW(sparsifier_uses_sq_grads("no-such-method"), Error);
  EXPECT_EQ(find_sparsifier("no-such-method"), nullptr);
  EXPECT_EQ(find_sparsifier("vgc"), &sparsifier_info("vgc"));
}

// The --sparsifier help names every row.
TEST(SparsifierRegistry, FlagHelpNamesEveryMethod) {
  const std::string help = sparsifier_flag_help();
  EXPECT_TRUE(has(help, "none (plain dense allreduce)")) << help;
  for (const std::string& name : sparsifier_names()) EXPECT_TRUE(has(help, name)) << name;
}

// The classes that also construct from SparsifierOptions validate against the keys their
// rows list (the method's keys()), with the registry's message, without a registry lookup.
TEST(SparsifierRegistry, DirectConstructorsCheckTheRowsKeys) {
  SparsifierOptions bad;
  bad.params = {{"nonsense", "1"}};
  const struct {
    const char* method;
    std::function<void()> build;
  } cases[] = {
      {"vgc", [&] { Vgc v(bad); }},
      {"fft", [&] { FftSparsifier f(bad); }},
      {"qsgd", [&] { Qsgd q(bad); }},
      {"terngrad", [&] { TernGrad t(bad); }},
      {"sidco-p", [&] { Sidco::from(bad, sidco::Variant::P); }},
  };
  for (const auto& c : cases) {
    const std::string direct = thrown_by(c.build);
    EXPECT_FALSE(direct.empty()) << c.method;
    EXPECT_EQ(direct, error_of(c.method, bad.params)) << c.method;
    EXPECT_TRUE(has(direct, std::string("not a parameter of --sparsifier ") + c.method)) << direct;
  }
  EXPECT_EQ(Vgc::keys().size(), sparsifier_info("vgc").keys.size());
  EXPECT_EQ(Sidco::keys().size(), sparsifier_info("sidco-gp").keys.size());
}

// A method registered from outside the tree gets the built-in rows' treatment: its keys
// are validated, it is listed, and make_sparsifier builds it; taken names, empty names
// and rows without a factory are refused.
TEST(SparsifierRegistry, RegisteredMethodIsValidatedListedAndBuilt) {
  const size_t before = sparsifiers().size();
  register_sparsifier({"registry_test_micro",
                       "MiCRO under another name (a test row)",
                       {"Yoon & Oh", "HiPC", 2023},
                       {real("hi", 1.1, "(0, inf)", "upper edge")},
                       [](const SpValues& v) -> SparsifierPtr {
                         part::ThresholdRule rule;
                         rule.hi = v.get("hi");
                         return std::make_unique<Micro>(rule);
                       }});
  ASSERT_EQ(sparsifiers().size(), before + 1);
  EXPECT_EQ(sparsifier_names().back(), "registry_test_micro");
  SparsifierOptions o;
  o.params["hi"] = "1.3";
  EXPECT_EQ(make_sparsifier("registry_test_micro", o)->pattern(), ExchangePattern::UnionAllreduce);
  EXPECT_TRUE(has(error_of("registry_test_micro", {{"hi", "-1"}}), "hi"));
  EXPECT_TRUE(has(error_of("registry_test_micro", {{"lo", "1"}}), "lo"));  // not declared
  EXPECT_TRUE(has(sparsifiers_listing(), "registry_test_micro"));
  EXPECT_TRUE(has(sparsifiers_json(), "\"registry_test_micro\""));

  const auto refusal = [](SparsifierInfo row) -> std::string {
    try {
      register_sparsifier(std::move(row));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const auto make = [](const SpValues&) -> SparsifierPtr { return nullptr; };
  EXPECT_TRUE(has(refusal({"topk", "again", {}, {}, make}), "a sparsifier of that name exists"));
  EXPECT_TRUE(has(refusal({"", "nameless", {}, {}, make}), "needs a name"));
  EXPECT_TRUE(has(refusal({"no_factory", "", {}, {}, nullptr}), "no factory"));
  EXPECT_EQ(sparsifiers().size(), before + 1);
}

}  // namespace
}  // namespace st::test
