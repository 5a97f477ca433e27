#include "sparsify/registry.h"

#include "core/error.h"
#include "sparsify/dense.h"
#include "sparsify/exdyna.h"
#include "sparsify/micro.h"
#include "sparsify/topk.h"

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
       "hi=1.1 lo=0.909 up=1.005 mid=1.00125 down=0.995 blocks=1024 align=32 tol=1.05 min_div=4",
       [](const SparsifierOptions& o) -> SparsifierPtr {
         return std::make_unique<ExDyna>(Micro::rule_from(o), ExDyna::blocks_from(o));
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
