#include "sparsify/sparsifier.h"

#include <algorithm>

#include "core/error.h"

namespace st {

const char* pattern_name(ExchangePattern p) {
  switch (p) {
    case ExchangePattern::UnionAllreduce:
      return "union-allreduce";
    case ExchangePattern::AllgatherSum:
      return "allgather-sum";
    case ExchangePattern::SharedIndices:
      return "shared-indices allreduce";
    case ExchangePattern::LeaderIndices:
      return "leader-indices allreduce";
    case ExchangePattern::Dense:
      return "dense allreduce";
  }
  return "?";
}

double SparsifierOptions::get(const std::string& key, double fallback) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  try {
    size_t used = 0;
    double v = std::stod(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  ST_THROW("--sp ", key, "=", it->second, ": not a number");
}

int64_t SparsifierOptions::get_int(const std::string& key, int64_t fallback) const {
  const double v = get(key, static_cast<double>(fallback));
  ST_CHECK(v == static_cast<double>(static_cast<int64_t>(v)), "--sp ", key,
           ": expected an integer, got ", v);
  return static_cast<int64_t>(v);
}

bool SparsifierOptions::get_bool(const std::string& key, bool fallback) const {
  auto it = params.find(key);
  if (it == params.end()) return fallback;
  if (it->second == "1" || it->second == "true" || it->second == "on") return true;
  if (it->second == "0" || it->second == "false" || it->second == "off") return false;
  ST_THROW("--sp ", key, "=", it->second, ": expected true or false");
}

void SparsifierOptions::check_keys(const std::string& method,
                                   const std::vector<std::string>& allowed) const {
  for (const auto& [key, value] : params) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    ST_THROW("--sp ", key, ": not a parameter of --sparsifier ", method,
             list.empty() ? " (it takes none)" : " (it takes: " + list + ")");
  }
}

}  // namespace st
