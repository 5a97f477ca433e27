#include "sparsify/resplit.h"

#include <set>

#include "core/error.h"
#include "sparsify/registry.h"

namespace st {

namespace {

std::string world_change(size_t from, int to) {
  return "resume it on " + std::to_string(from) + " ranks, not " + std::to_string(to);
}

}  // namespace

std::vector<float> resplit_residual(const std::vector<std::vector<float>>& old, int new_world,
                                    int new_rank) {
  ST_CHECK(new_world >= 1 && new_rank >= 0 && new_rank < new_world, "resplit: rank ", new_rank,
           " is outside world size ", new_world);
  std::vector<float> sum;
  for (size_t q = static_cast<size_t>(new_rank); q < old.size();
       q += static_cast<size_t>(new_world)) {
    const std::vector<float>& r = old[q];
    if (r.empty()) continue;
    if (sum.empty()) {
      sum = r;
      continue;
    }
    ST_CHECK(r.size() == sum.size(), "resplit: residuals of ", sum.size(), " and ", r.size(),
             " elements for one bucket");
    for (size_t i = 0; i < r.size(); ++i) sum[i] += r[i];
  }
  return sum;
}

std::string resplit_refusal(const std::vector<HookState>& old, int new_world,
                            const std::vector<uint8_t>& fresh_rule) {
  if (old.empty()) return "the checkpoint holds no sparsifier state";
  const std::string& method = old[0].method;
  for (const HookState& h : old)
    if (h.method != method)
      return "the checkpoint's ranks hold the states of --sparsifier " + method + " and " +
             h.method;
  // Rule state that differs from rank to rank (the row's per_rank_state) could only be
  // re-split by a rule of the method's own (and is not); carrying one rank's copy to
  // another would pair it with a residual it does not describe.
  const SparsifierInfo* row = find_sparsifier(method);
  if (!row)
    return "the checkpoint holds the state of --sparsifier " + method +
           ", which this program does not know";
  if (!row->per_rank_state.empty()) {
    for (const HookState& h : old)
      if (h.rule != fresh_rule)
        return "--sparsifier " + method + " keeps " + row->per_rank_state +
               ", which cannot be re-split: " + world_change(old.size(), new_world);
    return "";
  }
  for (const HookState& h : old)
    if (h.rule != old[0].rule)
      return "the rule state of --sparsifier " + method +
             " differs between the checkpoint's ranks, so no copy of it fits every rank: " +
             world_change(old.size(), new_world);
  return "";
}

HookState resplit_hook_state(const std::vector<HookState>& old, int new_world, int new_rank,
                             const std::vector<uint8_t>& fresh_rule, const std::string& what) {
  const std::string refusal = resplit_refusal(old, new_world, fresh_rule);
  ST_CHECK(refusal.empty(), what, ": ", refusal);
  std::set<int> ids;
  for (const HookState& h : old)
    for (const auto& entry : h.residuals) ids.insert(entry.first);
  HookState out;
  out.method = old[0].method;
  out.rule = old[0].rule;
  std::vector<std::vector<float>> rows(old.size());
  for (int id : ids) {
    size_t n = 0;
    for (size_t q = 0; q < old.size(); ++q) {
      auto it = old[q].residuals.find(id);
      rows[q] = it == old[q].residuals.end() ? std::vector<float>() : it->second;
      ST_CHECK(rows[q].empty() || n == 0 || rows[q].size() == n, what, ": the residual of bucket ",
               id, " has ", rows[q].size(), " elements on rank ", q, " but ", n,
               " on another rank (corrupt sparsifier state)");
      if (!rows[q].empty()) n = rows[q].size();
    }
    out.residuals[id] = resplit_residual(rows, new_world, new_rank);
  }
  return out;
}

}  // namespace st
