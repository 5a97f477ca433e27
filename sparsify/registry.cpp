#include "sparsify/registry.h"

#include "core/error.h"
#include "core/word_list.h"
#include "sparsify/cltk.h"
#include "sparsify/dense.h"
#include "sparsify/dgc.h"
#include "sparsify/exdyna.h"
#include "sparsify/fft.h"
#include "sparsify/gaussiank.h"
#include "sparsify/hard_threshold.h"
#include "sparsify/micro.h"
#include "sparsify/powersgd.h"
#include "sparsify/quantizers.h"
#include "sparsify/randomk.h"
#include "sparsify/redsync.h"
#include "sparsify/sage.h"
#include "sparsify/sidco.h"
#include "sparsify/signsgd.h"
#include "sparsify/sparsify_hook.h"
#include "sparsify/topk.h"
#include "sparsify/vgc.h"

namespace st {

namespace {

template <class T, class... Args>
std::function<SparsifierPtr(const SpValues&)> plain(Args... args) {
  return [=](const SpValues&) -> SparsifierPtr { return std::make_unique<T>(args...); };
}

// For a class that constructs from its validated --sp values.
template <class T>
std::function<SparsifierPtr(const SpValues&)> from_values() {
  return [](const SpValues& v) -> SparsifierPtr { return std::make_unique<T>(v); };
}

SparsifierInfo sidco_row(sidco::Variant v, std::string summary, Paper paper) {
  return {Sidco::method_name(v), std::move(summary), std::move(paper), Sidco::keys(),
          [v](const SpValues& o) -> SparsifierPtr {
            return std::make_unique<Sidco>(Sidco::from(o, v));
          }};
}

// Top-k, MiCRO and ExDyna, the fitted thresholds and the quantisers.
std::vector<SparsifierInfo> main_methods() {
  const Paper sidco{"Abdelmoniem et al.", "MLSys", 2021};
  return {
      {"dense",
       "no compression, through the sparsify pipeline (control)",
       {},
       {},
       plain<DenseSparsifier>()},
      {"topk",
       "local Top-k, union-allreduce (shows gradient build-up)",
       {"Aji & Heafield", "EMNLP", 2017},
       {},
       plain<TopK>(false)},
      {"gtopk",
       "global Top-k: local Top-k, allgather-sum of (index, value)",
       {"Aji & Heafield", "EMNLP", 2017},
       {},
       plain<TopK>(true)},
      {"micro",
       "MiCRO: exclusive rotating partitions, threshold tracking d",
       {"Yoon & Oh", "HiPC", 2023},
       Micro::keys(),
       [](const SpValues& o) -> SparsifierPtr {
         return std::make_unique<Micro>(Micro::rule_from(o));
       }},
      {"exdyna",
       "ExDyna: MiCRO with load-balancing block partitions",
       {"Yoon & Oh", "CCGrid", 2024},
       ExDyna::keys(),
       [](const SpValues& o) -> SparsifierPtr {
         return std::make_unique<ExDyna>(Micro::rule_from(o), ExDyna::blocks_from(o));
       }},
      sidco_row(sidco::Variant::E, "SIDCo-E: exponential-fit threshold, multi-stage", sidco),
      sidco_row(sidco::Variant::P, "SIDCo-P: generalized-Pareto-fit threshold, multi-stage", sidco),
      sidco_row(sidco::Variant::GP, "SIDCo-GP: gamma-fit first stage, then Pareto", sidco),
      {Vgc::kName,
       "variance-based: send when r^2 > alpha v, 32-bit packed",
       {"Tsuzuku, Imachi & Akiba", "arXiv 1802.06058", 2018},
       Vgc::keys(),
       from_values<Vgc>(),
       "a variance accumulator per element on each rank",
       {.sq_grads = true}},
      {FftSparsifier::kName,
       "FFT: top (1 - theta) coefficients, range-based float",
       {"Wang et al.", "HPDC", 2020},
       FftSparsifier::keys(),
       from_values<FftSparsifier>()},
      {Qsgd::kName,
       "QSGD: s levels, stochastic rounding, norm scaling",
       {"Alistarh et al.", "NeurIPS", 2017},
       Qsgd::keys(),
       from_values<Qsgd>()},
      {TernGrad::kName,
       "TernGrad: stochastic ternary, max-norm scale after sigma clipping",
       {"Wen et al.", "NeurIPS", 2017},
       TernGrad::keys(),
       from_values<TernGrad>()},
  };
}

// The baselines: leader and shared indices, fixed and searched thresholds.
std::vector<SparsifierInfo> baselines() {
  return {
      {"cltk",
       "CLT-k: leader t mod P runs Top-k, all allreduce there",
       {"Chen et al.", "NeurIPS", 2020},
       {},
       plain<CltK>()},
      {"randomk",
       "Random-k: k shared random positions per (seed, bucket, t)",
       {"Stich et al.", "NeurIPS", 2018},
       {},
       plain<RandomK>()},
      {"hard_threshold",
       "hard threshold: fixed |x| >= 1/(2 sqrt k), density uncontrolled",
       {"Sahu et al.", "NeurIPS", 2021},
       {},
       plain<HardThreshold>()},
      {"gaussiank",
       "Gaussian-k: normal-quantile threshold, x0.5/x1.5 corrections",
       {"Shi et al.", "arXiv 1911.08772", 2019},
       GaussianK::keys(),
       from_values<GaussianK>()},
      {"dgc",
       "DGC: sampled threshold, hierarchical Top-k, momentum correction",
       {"Lin et al.", "ICLR", 2018},
       Dgc::keys(),
       [](const SpValues& o) -> SparsifierPtr {
         return std::make_unique<Dgc>(Dgc::options_from(o));
       },
       "momentum on each rank (--sp momentum > 0)"},
      {"redsync",
       "RedSync: mean + r (max - mean) threshold, bisection to k < nnz < 2k",
       {"Fang et al.", "JPDC", 2019},
       RedSync::keys(),
       from_values<RedSync>()},
      {"sage",
       "SAGE: threshold scaled by sampled drift x density feedback",
       {"Yoon, Jeong & Oh", "J. Supercomputing", 2023},
       Sage::keys(),
       [](const SpValues& o) -> SparsifierPtr {
         return std::make_unique<Sage>(Sage::options_from(o));
       },
       "a threshold adapted to each rank's own gradient"},
      {"powersgd",
       "PowerSGD: rank-r power iteration per tensor, warm start, two allreduces",
       {"Vogels, Karimireddy & Jaggi", "NeurIPS", 2019},
       PowerSgd::keys(),
       from_values<PowerSgd>()},
      {"signsgd",
       "EF-signSGD: 1-bit signs scaled by mean |x|, error feedback",
       {"Karimireddy et al.", "ICML", 2019},
       SignSgd::keys(),
       from_values<SignSgd>()},
  };
}

}  // namespace

// The method's own keys, and the hook's (scope, min_tensor, ef), which every method accepts
// and SparsifyHook reads; each part is checked against its own declaration.
SpValues SparsifierInfo::values(const SparsifierOptions& options) const {
  std::map<std::string, std::string> own, hook;
  for (const auto& [key, value] : options.params) {
    bool is_hook = false;
    for (const SpKey& k : SparsifyHook::keys()) is_hook = is_hook || k.name == key;
    (is_hook ? hook : own)[key] = value;
  }
  SpValues(name, SparsifyHook::keys(), hook);  // throws for a bad scope, min_tensor or ef
  return SpValues(name, keys, own);
}

SparsifierPtr SparsifierInfo::build(const SparsifierOptions& options) const {
  return make(values(options));
}

ExchangePattern SparsifierInfo::pattern() const {
  return build(SparsifierOptions{})->pattern();
}

bool SparsifierInfo::partitioned() const {
  return build(SparsifierOptions{})->partitioned();
}

namespace {
std::vector<SparsifierInfo>& table() {
  static std::vector<SparsifierInfo> t = [] {
    std::vector<SparsifierInfo> rows = main_methods();
    for (SparsifierInfo& s : baselines()) rows.push_back(std::move(s));
    return rows;
  }();
  return t;
}
}  // namespace

const std::vector<SparsifierInfo>& sparsifiers() {
  return table();
}

void register_sparsifier(SparsifierInfo row) {
  ST_CHECK(!row.name.empty(), "register_sparsifier: the method needs a name");
  ST_CHECK(static_cast<bool>(row.make), "register_sparsifier('", row.name,
           "'): the row has no factory");
  for (const SparsifierInfo& s : table())
    ST_CHECK(s.name != row.name, "register_sparsifier('", row.name,
             "'): a sparsifier of that name exists");
  table().push_back(std::move(row));
}

std::vector<std::string> sparsifier_names() {
  std::vector<std::string> names;
  for (const auto& s : sparsifiers()) names.push_back(s.name);
  return names;
}

const SparsifierInfo* find_sparsifier(const std::string& name) {
  for (const auto& s : sparsifiers())
    if (s.name == name) return &s;
  return nullptr;
}

const SparsifierInfo& sparsifier_info(const std::string& name) {
  if (const SparsifierInfo* row = find_sparsifier(name)) return *row;
  ST_THROW("unknown --sparsifier '", name, "'; valid: ", word_list(sparsifier_names()));
}

bool sparsifier_uses_sq_grads(const std::string& name) {
  return sparsifier_info(name).side_inputs.sq_grads;
}

SparsifierPtr make_sparsifier(const std::string& name, const SparsifierOptions& options) {
  return sparsifier_info(name).build(options);
}

SpValues sp_values(const std::string& name, const SparsifierOptions& options) {
  return sparsifier_info(name).values(options);
}

}  // namespace st
