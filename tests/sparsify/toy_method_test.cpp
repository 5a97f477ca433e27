// A sparsification method added in this one file: the class, its --sp key and its registry
// row (a static SparsifierRegistrar, as an out-of-tree method registers). Nothing else
// names it, and the tests show what the row alone brings: the listing (text and JSON) and
// the --sparsifier help, --sp validation with the one-line errors, the conformance checks
// on 1 and 2 ranks, and the re-split rules for its per-rank state.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"
#include "sparsify/registry.h"
#include "sparsify/resplit.h"
#include "sparsify/sparsify_hook.h"
#include "sparsify/state_io.h"
#include "sparsify/testing/conformance.h"
#include "tests/comm/mpi_test_run.h"

namespace st::test {
namespace {

constexpr char kToy[] = "toy_topk";
constexpr char kKeep[] = "keep";  // the method's one --sp key, spelled once
constexpr char kToyState[] = "the threshold of each rank's own last selection";

// Each rank keeps the keep x k largest |x| of the bucket (Top-k with a wider k) and
// exchanges by union-allreduce. It remembers, per bucket, the threshold its own last
// selection used: state that differs from rank to rank, which its row declares.
class ToyTopK : public Sparsifier {
 public:
  explicit ToyTopK(const SpValues& v) : keep_(v.get_int(kKeep)) {}
  static std::vector<SpKey> keys() {
    return {whole(kKeep, 1, "[1, 4]", "multiples of k each rank keeps")};
  }

  std::string name() const override { return kToy; }
  ExchangePattern pattern() const override { return ExchangePattern::UnionAllreduce; }
  void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                 DeviceSelection& out) override {
    out.clear_scalars();
    ops.resize(out.values, bulk::Elem::F32, 0);
    const int64_t k = std::min<int64_t>(ctx.k * keep_, x.size());
    out.threshold = ops.topk_abs(x, {0, x.size()}, k, out.indices);
    last_threshold_[ctx.bucket] = static_cast<float>(out.threshold);
  }
  void save_state(StateWriter& out) const override {
    out.put_buckets(last_threshold_, [](StateWriter& w, float t) { w.put<float>(t); });
  }
  void load_state(StateReader& in) override {
    in.get_buckets(last_threshold_, [](StateReader& r, float& t) { t = r.get<float>(); });
  }

 private:
  int64_t keep_;
  std::map<int, float> last_threshold_;
};

// Its row, the method's only declaration.
SparsifierInfo toy_info() {
  SparsifierInfo row;
  row.name = kToy;
  row.summary = "toy: keep x k largest |x| per rank, union-allreduce";
  row.paper = {"Aji & Heafield", "EMNLP", 2017};
  row.keys = ToyTopK::keys();
  row.make = [](const SpValues& v) -> SparsifierPtr { return std::make_unique<ToyTopK>(v); };
  row.per_rank_state = kToyState;
  return row;
}
const SparsifierRegistrar toy_row(toy_info());

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message make_sparsifier throws for these --sp pairs ("" if none).
std::string error_of(std::map<std::string, std::string> params) {
  SparsifierOptions o;
  o.params = std::move(params);
  try {
    make_sparsifier(kToy, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ToyMethod, AppearsInTheListingJsonAndFlagHelp) {
  const std::string text = sparsifiers_listing();
  EXPECT_TRUE(has(text, "toy_topk     toy: keep x k largest |x| per rank, union-allreduce"))
      << text;
  EXPECT_TRUE(has(text, "exchange: union-allreduce")) << text;
  EXPECT_TRUE(has(text, "--sp keep=1          multiples of k each rank keeps; 1, 2, 3 or 4"))
      << text;
  EXPECT_TRUE(has(text, std::string("per-rank state: ") + kToyState)) << text;

  const auto list = nlohmann::json::parse(sparsifiers_json()).at("sparsifiers");
  const auto toy = std::find_if(list.begin(), list.end(),
                                [](const nlohmann::json& m) { return m.at("name") == kToy; });
  ASSERT_NE(toy, list.end());
  EXPECT_EQ(toy->at("pattern"), "union-allreduce");
  EXPECT_EQ(toy->at("per_rank_state"), kToyState);
  EXPECT_TRUE(toy->at("side_inputs").empty());
  ASSERT_EQ(toy->at("keys").size(), 1u);
  EXPECT_EQ(toy->at("keys")[0].at("name"), kKeep);
  EXPECT_EQ(toy->at("keys")[0].at("default"), 1);
  EXPECT_EQ(toy->at("keys")[0].at("allowed"), "1, 2, 3 or 4");

  EXPECT_TRUE(has(sparsifier_flag_help(), "toy_topk")) << sparsifier_flag_help();
}

TEST(ToyMethod, ItsKeysAreValidatedWithOneLineErrors) {
  EXPECT_EQ(error_of({{kKeep, "3"}}), "");
  const std::string unknown = error_of({{"kep", "2"}});
  EXPECT_TRUE(has(unknown, "--sp kep: not a parameter of --sparsifier toy_topk (it takes: keep)"))
      << unknown;
  const std::string range = error_of({{kKeep, "5"}});
  EXPECT_TRUE(has(range,
                  "--sparsifier toy_topk: --sp keep=5 is not allowed; keep takes 1, 2, 3 "
                  "or 4"))
      << range;
  for (const std::string& line : {unknown, range}) EXPECT_FALSE(has(line, "\n")) << line;
  // The hook's keys stay valid for it, as for every method.
  EXPECT_EQ(error_of({{kKeep, "2"}, {"scope", "tensor"}}), "");
}

TEST(ToyMethod, PassesTheConformanceChecks) {
  for (const char* keep : {"1", "3"}) {
    conformance::Case c;
    c.method = kToy;
    c.params = {{kKeep, keep}};
    const conformance::Report report = conformance::check_conformance(c, world());
    EXPECT_TRUE(report.passed()) << report.summary();
    EXPECT_GT(report.checks, 100) << report.summary();
  }
}

// Its row says the rule state is each rank's own: a resume on another number of ranks
// refuses it once that state has started, and takes it while it is still fresh. Topk's row
// declares none, so the same bytes on every rank re-split.
TEST(ToyMethod, ResplitKnowsItsPerRankState) {
  EXPECT_EQ(sparsifier_info(kToy).per_rank_state, kToyState);
  EXPECT_FALSE(sparsifier_uses_sq_grads(kToy));
  EXPECT_TRUE(sparsifier_uses_sq_grads("vgc"));

  SparsifierOptions opt;
  SparsifyHook hook(make_sparsifier(kToy, opt), opt);
  StateWriter fresh;
  hook.sparsifier().save_state(fresh);
  Bucket bucket;
  bucket.numel = 500;
  Tensor g = conformance::heavy_tailed_gradient(bucket.numel, world().rank(), 0, 0);
  hook.exchange(bucket, g, world(), 0);
  StateWriter started;
  hook.sparsifier().save_state(started);
  ASSERT_NE(started.bytes(), fresh.bytes());

  HookState h;
  h.method = kToy;
  h.rule = started.bytes();
  const std::string line = resplit_refusal({h, h}, 4, fresh.bytes());
  EXPECT_TRUE(has(line, std::string("--sparsifier toy_topk keeps ") + kToyState +
                            ", which cannot be re-split: resume it on 2 ranks, not 4"))
      << line;
  h.rule = fresh.bytes();
  EXPECT_EQ(resplit_refusal({h, h}, 4, fresh.bytes()), "");
  h.method = "topk";
  h.rule = started.bytes();
  EXPECT_EQ(resplit_refusal({h, h}, 4, fresh.bytes()), "");
}

}  // namespace
}  // namespace st::test
