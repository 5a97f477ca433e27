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
#include "sparsify/quantizers.h"
#include "sparsify/randomk.h"
#include "sparsify/redsync.h"
#include "sparsify/sage.h"
#include "sparsify/sidco.h"
#include "sparsify/topk.h"
#include "sparsify/vgc.h"

namespace st {

const std::vector<SparsifierInfo>& sparsifiers() {
  static const std::vector<SparsifierInfo> table = {
      {"dense", "no compression, through the sparsify pipeline (control)", "",
       [](const SparsifierOptions&) -> SparsifierPtr {
         return std::make_unique<DenseSparsifier>();
       }},
      {"topk", "local Top-k, union-allreduce (shows gradient build-up)", "",
       [](const SparsifierOptions&) -> SparsifierPtr { return std::make_unique<TopK>(false); }},
      {"gtopk", "global Top-k: local Top-k, allgather-sum of (index, value)", "",
       [](const SparsifierOptions&) -> SparsifierPtr { return std::make_unique<TopK>(true); }},
      {"micro", "MiCRO: exclusive rotating partitions, threshold tracking d (Yoon & Oh, HiPC 2023)",
       "hi=1.1 lo=0.909 up=1.005 mid=1.00125 down=0.995",
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<Micro>(Micro::rule_from(o));
       }},
      {"exdyna", "ExDyna: MiCRO with load-balancing block partitions (Yoon & Oh, CCGrid 2024)",
       "hi=1.1 lo=0.909 up=1.005 mid=1.00125 down=0.995 blocks=1024 align=32 tol=1.05 min_div=4 "
       "fill=0",
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<ExDyna>(Micro::rule_from(o), ExDyna::blocks_from(o));
       }},
      {"sidco-e",
       "SIDCo-E: exponential-fit threshold, multi-stage (Abdelmoniem et al., MLSys 2021)",
       Sidco::kParams,
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<Sidco>(Sidco::from(o, sidco::Variant::E));
       }},
      {"sidco-p", "SIDCo-P: generalized-Pareto-fit threshold, multi-stage (MLSys 2021)",
       Sidco::kParams,
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<Sidco>(Sidco::from(o, sidco::Variant::P));
       }},
      {"sidco-gp", "SIDCo-GP: gamma-fit first stage, then Pareto (MLSys 2021)", Sidco::kParams,
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<Sidco>(Sidco::from(o, sidco::Variant::GP));
       }},
      {"vgc", "variance-based: send when r^2 > alpha v, 32-bit packed (Tsuzuku et al. 2018)",
       Vgc::kParams,
       [](const SparsifierOptions& o) -> SparsifierPtr { return std::make_unique<Vgc>(o); }},
      {"fft", "FFT: top (1 - theta) coefficients, range-based float (Wang et al., HPDC 2020)",
       FftSparsifier::kParams,
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<FftSparsifier>(o);
       }},
      {"qsgd", "QSGD: s levels, stochastic rounding, norm scaling (Alistarh et al. 2017)",
       Qsgd::kParams,
       [](const SparsifierOptions& o) -> SparsifierPtr { return std::make_unique<Qsgd>(o); }},
      {"terngrad",
       "TernGrad: stochastic ternary, max-norm scale after 2.5-sigma clipping (Wen et al. 2017)",
       TernGrad::kParams,
       [](const SparsifierOptions& o) -> SparsifierPtr { return std::make_unique<TernGrad>(o); }},
      // Baselines (issue 5).
      {"cltk", "CLT-k: leader t mod P runs Top-k, all allreduce there (Chen et al. 2020)", "",
       [](const SparsifierOptions&) -> SparsifierPtr { return std::make_unique<CltK>(); }},
      {"randomk", "Random-k: k shared random positions per (seed, bucket, t) (Stich et al. 2018)",
       "", [](const SparsifierOptions&) -> SparsifierPtr { return std::make_unique<RandomK>(); }},
      {"hard_threshold", "hard threshold: fixed |x| >= 1/(2 sqrt k), density uncontrolled", "",
       [](const SparsifierOptions&) -> SparsifierPtr { return std::make_unique<HardThreshold>(); }},
      {"gaussiank", "Gaussian-k: normal-quantile threshold, x0.5/x1.5 corrections (Shi et al.)",
       "loops=3",
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<GaussianK>(static_cast<int>(o.get_int("loops", 3)));
       }},
      {"dgc", "DGC: sampled threshold, hierarchical Top-k, momentum correction (Lin et al. 2018)",
       "sample=0.01 momentum=0 mask=1",
       [](const SparsifierOptions& o) -> SparsifierPtr {
         DgcOptions d;
         d.sample = o.get("sample", d.sample);
         d.momentum = o.get("momentum", d.momentum);
         d.mask = o.get_bool("mask", d.mask);
         return std::make_unique<Dgc>(d);
       }},
      {"redsync", "RedSync: mean + r (max - mean) threshold, bisection to k < nnz < 2k", "iters=20",
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<RedSync>(static_cast<int>(o.get_int("iters", 20)));
       }},
      {"sage", "SAGE: threshold scaled by sampled drift x density feedback (alpha beta gamma)",
       "slovin_e=0.05 band=10 down=0.95 up=1.05",
       [](const SparsifierOptions& o) -> SparsifierPtr {
         SageOptions a;
         a.slovin_e = o.get("slovin_e", a.slovin_e);
         a.band = o.get("band", a.band);
         a.down = o.get("down", a.down);
         a.up = o.get("up", a.up);
         return std::make_unique<Sage>(a);
       }},
  };
  return table;
}

std::vector<std::string> sparsifier_names() {
  std::vector<std::string> names;
  for (const auto& s : sparsifiers()) names.push_back(s.name);
  return names;
}

SparsifierPtr make_sparsifier(const std::string& name, const SparsifierOptions& options) {
  for (const auto& s : sparsifiers()) {
    if (s.name != name) continue;
    std::vector<std::string> keys;
    for (size_t b = 0, e; b < s.params.size(); b = e + 1) {
      e = s.params.find(' ', b);
      if (e == std::string::npos) e = s.params.size();
      const std::string kv = s.params.substr(b, e - b);
      if (!kv.empty()) keys.push_back(kv.substr(0, kv.find('=')));
    }
    options.check_keys(name, keys);
    return s.make(options);
  }
  std::string list;
  for (const auto& n : sparsifier_names()) list += (list.empty() ? "" : ", ") + n;
  ST_THROW("unknown --sparsifier '", name, "'; valid: ", list);
}

}  // namespace st
