#include "sparsify/registry.h"

#include "core/error.h"
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

std::vector<SpKey> threshold_keys() {
  const part::ThresholdRule rule;  // MiCRO's defaults
  return {
      real("hi", rule.hi, "(0, inf)", "upper edge of the density band (ratio k_prev / k)"),
      real("lo", rule.lo, "(0, inf)", "lower edge of the band (lo <= hi)"),
      real("up", rule.up, "(0, inf)", "tau factor above the band"),
      real("mid", rule.mid, "(0, inf)", "tau factor inside the band"),
      real("down", rule.down, "(0, inf)", "tau factor below the band"),
  };
}

std::vector<SpKey> block_keys() {
  const part::BlockRule rule;  // ExDyna's defaults
  return {
      whole("blocks", rule.blocks, "[1, inf)", "blocks per bucket"),
      whole("align", rule.align, "[1, inf)", "block size rounded down to a multiple of this"),
      real("tol", rule.tolerance, "[1, inf)",
           "load tolerance: high above tol k_acc, low below k_acc / tol"),
      real("min_div", rule.min_div, "(0, inf)", "minimum partition: blocks / (min_div P) blocks"),
      flag("fill", rule.fill, "not in the paper: floor(n / b) whole blocks, tail < one block"),
      flag("ref", rule.reference,
           "reference arithmetic: k_acc = int(k_prev / P), low edge k_acc * 0.95238 "
           "(1 / tol to 5 decimals); 0: real values"),
  };
}

std::vector<SpKey> sidco_keys() {
  const Sidco::Options o;
  SpKey adapt = whole("adapt", o.adapt, "[-1, 1]",
                      "stage-count adaptation: 1 raises M on over-selection, -1 the reverse, "
                      "0 fixed, auto turns round per bucket");
  adapt.words = {{"auto", Sidco::kAuto}};
  return {
      whole("stages", o.stages, "[0, inf)",
            "initial number of stages M (0: every stage keeps 0.25, M follows from d)"),
      adapt,
      whole("every", o.every, "[1, inf)", "exchanges of a bucket between adaptations"),
      real("band", o.band, "(0, 1)", "tolerated deviation of achieved / target"),
  };
}

SparsifierInfo sidco_row(sidco::Variant v, std::string summary, Paper paper) {
  return {Sidco::method_name(v), std::move(summary), std::move(paper), sidco_keys(),
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
       threshold_keys(),
       [](const SpValues& o) -> SparsifierPtr {
         return std::make_unique<Micro>(Micro::rule_from(o));
       }},
      {"exdyna",
       "ExDyna: MiCRO with load-balancing block partitions",
       {"Yoon & Oh", "CCGrid", 2024},
       [] {
         std::vector<SpKey> keys = threshold_keys();
         for (SpKey& k : block_keys()) keys.push_back(std::move(k));
         return keys;
       }(),
       [](const SpValues& o) -> SparsifierPtr {
         return std::make_unique<ExDyna>(Micro::rule_from(o), ExDyna::blocks_from(o));
       }},
      sidco_row(sidco::Variant::E, "SIDCo-E: exponential-fit threshold, multi-stage", sidco),
      sidco_row(sidco::Variant::P, "SIDCo-P: generalized-Pareto-fit threshold, multi-stage", sidco),
      sidco_row(sidco::Variant::GP, "SIDCo-GP: gamma-fit first stage, then Pareto", sidco),
      {"vgc",
       "variance-based: send when r^2 > alpha v, 32-bit packed",
       {"Tsuzuku, Imachi & Akiba", "arXiv 1802.06058", 2018},
       {real("alpha", 1.5, "(0, inf)", "send when r^2 > alpha v (the paper: 1 to 2)"),
        real("zeta", 0.999, "(0, 1]", "decay of unsent variance"),
        real("tau", 0, "[0, inf)", "optional threshold on |r| (0 = off)"),
        whole("batch", 32, "[1, inf)", "B when the layers give no per-sample sums")},
       [](const SpValues& o) -> SparsifierPtr { return std::make_unique<Vgc>(o); }},
      {"fft",
       "FFT: top (1 - theta) coefficients, range-based float",
       {"Wang et al.", "HPDC", 2020},
       {real("theta", -1, "(-inf, 1)", "initial theta (negative: 1 - --density)"),
        real("theta_min", 0, "[0, 1)", "floor of the theta schedule"),
        real("decay", 0.99, "(0, 1]", "theta factor every `every` iterations"),
        whole("every", 1000, "[1, inf)", "iterations between theta decays"),
        whole("bits", 16, "[2, 24]", "width of the range-based float"),
        whole("block", 0, "[0, inf)",
              "transform pieces of at most this many elements (0: whole tensors; not 1)")},
       [](const SpValues& o) -> SparsifierPtr { return std::make_unique<FftSparsifier>(o); }},
      {"qsgd",
       "QSGD: s levels, stochastic rounding, norm scaling",
       {"Alistarh et al.", "NeurIPS", 2017},
       {whole("levels", 15, "[1, 1048576]", "stochastic levels s (4-bit setting: 15)"),
        whole("chunk", 512, "[0, inf)", "elements per norm (0: the whole bucket)")},
       [](const SpValues& o) -> SparsifierPtr { return std::make_unique<Qsgd>(o); }},
      {"terngrad",
       "TernGrad: stochastic ternary, max-norm scale after sigma clipping",
       {"Wen et al.", "NeurIPS", 2017},
       {whole("chunk", 0, "[0, inf)", "elements sharing one scale (0: the whole bucket)"),
        real("clip", 2.5, "[0, inf)", "clip to clip x sigma before scaling (0 = off)")},
       [](const SpValues& o) -> SparsifierPtr { return std::make_unique<TernGrad>(o); }},
  };
}

// The baselines: leader and shared indices, fixed and searched thresholds.
std::vector<SparsifierInfo> baselines() {
  const DgcOptions dgc;
  const SageOptions sage;
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
       {whole("loops", GaussianK::kLoops, "[1, inf)", "threshold counts at most")},
       [](const SpValues& o) -> SparsifierPtr {
         return std::make_unique<GaussianK>(static_cast<int>(o.get_int("loops")));
       }},
      {"dgc",
       "DGC: sampled threshold, hierarchical Top-k, momentum correction",
       {"Lin et al.", "ICLR", 2018},
       {real("sample", dgc.sample, "(0, 1]", "fraction of positions sampled for the threshold"),
        real("momentum", dgc.momentum, "[0, 1)", "momentum correction coefficient m (0 = off)"),
        flag("mask", dgc.mask, "momentum factor masking (with momentum correction)")},
       [](const SpValues& o) -> SparsifierPtr {
         DgcOptions d;
         d.sample = o.get("sample");
         d.momentum = o.get("momentum");
         d.mask = o.get_bool("mask");
         return std::make_unique<Dgc>(d);
       }},
      {"redsync",
       "RedSync: mean + r (max - mean) threshold, bisection to k < nnz < 2k",
       {"Fang et al.", "JPDC", 2019},
       {whole("iters", RedSync::kIters, "[1, inf)", "bisection steps at most")},
       [](const SpValues& o) -> SparsifierPtr {
         return std::make_unique<RedSync>(static_cast<int>(o.get_int("iters")));
       }},
      {"sage",
       "SAGE: threshold scaled by sampled drift x density feedback",
       {"Yoon, Jeong & Oh", "J. Supercomputing", 2023},
       {real("slovin_e", sage.slovin_e, "(0, 1)", "margin of error of Slovin's sample size"),
        real("band", sage.band, "(1, inf)", "gamma acts when d_exam / d leaves [1/band, band]"),
        real("down", sage.down, "(0, inf)", "gamma below the band"),
        real("up", sage.up, "(0, inf)", "gamma above the band")},
       [](const SpValues& o) -> SparsifierPtr {
         SageOptions a;
         a.slovin_e = o.get("slovin_e");
         a.band = o.get("band");
         a.down = o.get("down");
         a.up = o.get("up");
         return std::make_unique<Sage>(a);
       }},
      {"powersgd",
       "PowerSGD: rank-r power iteration per tensor, warm start, two allreduces",
       {"Vogels, Karimireddy & Jaggi", "NeurIPS", 2019},
       {whole("rank", 2, "[1, inf)",
              "rank r of the approximation (the paper's CIFAR-10 setting: 2)"),
        whole("min_size", 0, "[0, inf)",
              "matrices with fewer elements are sent dense (vectors always are)"),
        flag("warm_start", true, "reuse last step's averaged Q (off: a fresh random Q each step)")},
       [](const SpValues& o) -> SparsifierPtr { return std::make_unique<PowerSgd>(o); }},
      {"signsgd",
       "EF-signSGD: 1-bit signs scaled by mean |x|, error feedback",
       {"Karimireddy et al.", "ICML", 2019},
       {flag("per_tensor", true, "one scale per tensor, as the reference code (off: per bucket)")},
       [](const SpValues& o) -> SparsifierPtr { return std::make_unique<SignSgd>(o); }},
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

const SparsifierInfo& sparsifier_info(const std::string& name) {
  for (const auto& s : sparsifiers())
    if (s.name == name) return s;
  std::string list;
  for (const auto& n : sparsifier_names()) list += (list.empty() ? "" : ", ") + n;
  ST_THROW("unknown --sparsifier '", name, "'; valid: ", list);
}

SparsifierPtr make_sparsifier(const std::string& name, const SparsifierOptions& options) {
  return sparsifier_info(name).build(options);
}

SpValues sp_values(const std::string& name, const SparsifierOptions& options) {
  return sparsifier_info(name).values(options);
}

}  // namespace st
