// A sparsification method added in this one file: the class, its --sp key, a bulk pass of
// its own (bulk/pass.h) and its registry row (a static SparsifierRegistrar, as an
// out-of-tree method registers). Nothing else names it, and the tests show what the row
// alone brings: the listing (text and JSON) and the --sparsifier help, --sp validation
// with the one-line errors, the conformance checks on 1 and 2 ranks, the re-split rules
// for its per-rank state, and its pass running on the CPU and on the emulated device.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/error.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/emu_ops.h"
#include "sparsify/bulk/pass.h"
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

// The method's own pass: m = |x| damped above `cap` (m = cap + (|x| - cap) / 2 there), so
// a few huge entries do not crowd out the rest. A CPU body only: the emulated device runs
// it on its stream; on CUDA it is refused in one line (Pass::on_cuda).
class DampedMagnitudes final : public bulk::Pass {
 public:
  explicit DampedMagnitudes(float cap) : cap_(cap) {}
  const char* name() const override { return "toy damped magnitudes"; }
  bulk::PassResult on_host(const bulk::PassMemory& b) const override {
    const float* x = b.f32(0);
    float* m = b.f32(1);
    for (int64_t i = 0; i < b.n(0); ++i) m[i] = damped(x[i], cap_);
    return {};
  }
  static float damped(float x, float cap) {
    const float a = std::abs(x);
    return a > cap ? cap + (a - cap) / 2 : a;
  }

 private:
  float cap_;
};

// Each rank keeps the keep x k largest damped |x| of the bucket (Top-k with a wider k,
// ranked by its own pass) and exchanges by union-allreduce. It remembers, per bucket, the threshold
// its own last selection used: state that differs from rank to rank, which its row declares.
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
    ops.resize(magnitudes_, bulk::Elem::F32, x.size());
    ops.run_pass(std::make_shared<DampedMagnitudes>(kCap), {&x, &magnitudes_});
    out.threshold = ops.topk_abs(magnitudes_, {0, x.size()}, k, out.indices);
    last_threshold_[ctx.bucket] = static_cast<float>(out.threshold);
  }
  void save_state(StateWriter& out) const override {
    out.put_buckets(last_threshold_, [](StateWriter& w, float t) { w.put<float>(t); });
  }
  void load_state(StateReader& in) override {
    in.get_buckets(last_threshold_, [](StateReader& r, float& t) { t = r.get<float>(); });
  }

 public:
  static constexpr float kCap = 0.01f;

 private:
  int64_t keep_;
  std::map<int, float> last_threshold_;
  bulk::Buffer magnitudes_;  // scratch on the bucket's device
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

// The pass on the CPU and, queued on its stream, on the emulated device: the same
// selection, and the one a host loop over the damped magnitudes gives.
TEST(ToyMethod, ItsOwnPassRunsOnTheCpuAndOnTheEmulatedDevice) {
  const int64_t n = 3000;
  const std::vector<float> x =
      conformance::heavy_tailed_gradient(n, world().rank(), 0, 0).to_vector();
  SelectContext ctx;
  ctx.k = 25;
  std::vector<std::vector<int32_t>> chosen;
  std::vector<double> thresholds;
  bulk::CpuOps cpu;
  bulk::EmuOps emu(Device::emu(0));
  for (bulk::Ops* ops : {static_cast<bulk::Ops*>(&cpu), static_cast<bulk::Ops*>(&emu)}) {
    SCOPED_TRACE(ops->name());
    ToyTopK toy(SpValues(kToy, ToyTopK::keys(), {{kKeep, "2"}}));
    bulk::Buffer xb;
    ops->upload(x.data(), bulk::Elem::F32, n, xb);
    DeviceSelection out;
    toy.select_on(*ops, ctx, xb, out);
    std::vector<int32_t> idx(static_cast<size_t>(out.indices.size()));
    ops->download(out.indices, 0, out.indices.size(), idx.data());
    chosen.push_back(idx);
    thresholds.push_back(out.threshold);
  }
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto m = [&](int32_t i) { return DampedMagnitudes::damped(x[i], ToyTopK::kCap); };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return m(a) > m(b); });
  const float kth = m(order[49]);
  ASSERT_GT(std::abs(x[static_cast<size_t>(order[49])]), ToyTopK::kCap) << "a damped threshold";
  order.resize(50);
  std::sort(order.begin(), order.end());
  EXPECT_EQ(chosen[0], order) << "the CPU";
  EXPECT_EQ(chosen[1], order) << "the emulated device";
  EXPECT_EQ(thresholds[0], kth) << "the k-th damped magnitude, not the k-th |x|";
  EXPECT_EQ(thresholds[1], kth);
}

}  // namespace
}  // namespace st::test
