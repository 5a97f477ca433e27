#include "sparsify/hook_checkpoint.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "core/error.h"
#include "core/safetensors.h"
#include "sparsify/hook_state.h"
#include "sparsify/resplit.h"

namespace st {

namespace {
const char* kSparsifyState = "sparsify.state";
const char* kSparsifyStateBytes = "sparsify.state_bytes";
}  // namespace

std::vector<std::pair<std::string, Tensor>> sparsify_state_tensors(
    const std::vector<std::vector<uint8_t>>& rows) {
  const int64_t P = static_cast<int64_t>(rows.size());
  int64_t words = 1;
  for (const auto& r : rows)
    words = std::max<int64_t>(words, (static_cast<int64_t>(r.size()) + 3) / 4);
  Tensor all = Tensor::zeros({P, words}, DType::I32);
  Tensor lens = Tensor::zeros({P}, DType::I32);
  for (int64_t q = 0; q < P; ++q) {
    const auto& r = rows[static_cast<size_t>(q)];
    ST_CHECK(r.size() <= static_cast<size_t>(INT32_MAX), "sparsifier state of rank ", q, " has ",
             r.size(), " bytes, more than a checkpoint row holds");
    lens.data<int32_t>()[q] = static_cast<int32_t>(r.size());
    std::memcpy(static_cast<uint8_t*>(all.raw()) + q * words * 4, r.data(), r.size());
  }
  return {{kSparsifyState, all}, {kSparsifyStateBytes, lens}};
}

std::vector<std::pair<std::string, Tensor>> gather_sparsify_state(const SparsifyHook& hook,
                                                                  Communicator& comm) {
  const std::vector<uint8_t> bytes = hook.save_state();
  const std::vector<std::string> gathered =
      comm.gather_bytes(std::string(bytes.begin(), bytes.end()), 0);
  // Only rank 0 writes the checkpoint; the other ranks' result is not used.
  std::vector<std::vector<uint8_t>> rows;
  for (const std::string& s : gathered) rows.emplace_back(s.begin(), s.end());
  if (rows.empty()) rows.push_back(bytes);
  return sparsify_state_tensors(rows);
}

namespace {
// The error feedback owed to the model is the residuals' sum over the ranks: after a
// re-split every rank's new residual is summed (one allreduce per bucket, once) and
// compared with the old ranks' sum; rank 0 reports the largest difference.
void report_resplit(const SparsifyHook& hook, const std::vector<HookState>& old,
                    const std::string& path, Communicator& comm) {
  std::map<int, size_t> sizes;
  for (const HookState& h : old)
    for (const auto& [id, r] : h.residuals)
      if (!r.empty()) sizes[id] = r.size();
  double largest_diff = 0, largest_sum = 0;
  for (const auto& [id, n] : sizes) {
    std::vector<double> want(n, 0.0);
    for (const HookState& h : old)
      if (auto it = h.residuals.find(id); it != h.residuals.end() && !it->second.empty())
        for (size_t i = 0; i < n; ++i) want[i] += it->second[i];
    const Tensor mine = hook.residual(id);
    Tensor sum = mine.defined() && mine.numel() == static_cast<int64_t>(n)
                     ? mine.clone()
                     : Tensor::zeros({static_cast<int64_t>(n)});
    comm.allreduce(sum);
    const float* got = sum.f32();
    for (size_t i = 0; i < n; ++i) {
      largest_diff = std::max(largest_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
      largest_sum = std::max(largest_sum, std::fabs(want[i]));
    }
  }
  if (comm.rank() == 0)
    std::fprintf(stderr,
                 "note: %s: the %s state of %zu ranks re-split over %d: residual sums over the "
                 "ranks kept in %zu buckets (largest difference %.3g, largest |sum| %.3g); rule "
                 "state carried over\n",
                 path.c_str(), old[0].method.c_str(), old.size(), comm.size(), sizes.size(),
                 largest_diff, largest_sum);
}

// The method named in the metadata must be the one whose state the rows hold.
void check_state_method(StateReader in, const std::map<std::string, std::string>& meta,
                        const std::string& path) {
  const std::string method = in.get_string();
  auto it = meta.find("sparsifier");
  ST_CHECK(it == meta.end() || it->second == method, path, ": the metadata says --sparsifier ",
           it->second, " but ", kSparsifyState, " holds the state of ", method);
}

}  // namespace

void restore_hook_rows(SparsifyHook& hook, int old_world,
                       const std::function<StateReader(int)>& row, const std::string& what,
                       Communicator& comm) {
  if (old_world == comm.size()) {
    StateReader in = row(comm.rank());
    hook.load_state(in);
    return;
  }
  std::vector<HookState> old;
  for (int q = 0; q < old_world; ++q) {
    StateReader in = row(q);
    old.push_back(read_hook_state(in));
  }
  StateWriter fresh;
  hook.sparsifier().save_state(fresh);
  const std::vector<uint8_t> bytes =
      write_hook_state(resplit_hook_state(old, comm.size(), comm.rank(), fresh.bytes(), what));
  StateReader in(bytes.data(), bytes.size(), row(0).what());
  in.set_new_world(comm.size());
  hook.load_state(in);
  report_resplit(hook, old, what, comm);
}

// False when the file holds no sparsifier state. A state of another number of ranks is
// re-split for this one (sparsify/resplit.h) or refused in one line.
bool restore_sparsify_state(SparsifyHook& hook, const std::string& path, Communicator& comm,
                            std::map<std::string, std::string>* meta) {
  const TensorFile f = load_safetensors(path);
  if (meta) *meta = f.metadata;
  const Tensor* all = f.find(kSparsifyState);
  const Tensor* lens = f.find(kSparsifyStateBytes);
  if (!all && !lens) return false;
  ST_CHECK(all && lens, path, ": ", all ? kSparsifyStateBytes : kSparsifyState, " is missing");
  ST_CHECK(all->rank() == 2 && all->dtype() == DType::I32 && all->dim(0) >= 1 &&
               lens->numel() == all->dim(0),
           path, ": malformed ", kSparsifyState, " ", all->str());
  ST_CHECK(lens->dtype() == DType::I32, path, ": malformed ", kSparsifyStateBytes);
  const int old_world = static_cast<int>(all->dim(0));
  const int64_t words = all->dim(1);
  const std::string what = path + ": " + kSparsifyState;
  auto row = [&](int q) {
    const int32_t size = lens->data<int32_t>()[q];
    ST_CHECK(size >= 0 && size <= words * 4, path, ": malformed ", kSparsifyStateBytes);
    const auto* data = static_cast<const uint8_t*>(all->raw()) + q * words * 4;
    return StateReader(data, static_cast<size_t>(size), what);
  };
  check_state_method(row(0), f.metadata, path);
  // The rows decide how the state is re-split; a world_size that says otherwise means
  // the metadata and the state are not of one run.
  if (f.metadata.count("world_size"))
    ST_CHECK(f.metadata.at("world_size") == std::to_string(old_world), path,
             ": checkpoint metadata 'world_size' is ", f.metadata.at("world_size"), " but ",
             kSparsifyState, " holds the rows of ", old_world, " rank(s)");
  restore_hook_rows(hook, old_world, row, path, comm);
  return true;
}

}  // namespace st
