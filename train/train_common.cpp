#include "train/train_common.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "core/safetensors.h"
#include "sparsify/hook_state.h"
#include "sparsify/registry.h"
#include "sparsify/resplit.h"

namespace st {

std::string format_duration(double s) {
  char buf[32];
  const int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", static_cast<long>(t / 3600),
                  static_cast<long>(t % 3600 / 60));
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", static_cast<long>(t / 60),
                  static_cast<long>(t % 60));
  return buf;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

// One iteration's sp_* columns: counts, bytes and phase times summed over the buckets;
// the threshold of the largest bucket; the padding weighted over the buckets (padded over
// filled slots of the iteration's padded gathers); the residual norm over all buckets.
void add_sparsify_metrics(const std::vector<SparsifyStats>& stats, MetricRow& row) {
  // The phase times, each summed over the buckets, in column order.
  static const std::pair<const char*, double SparsifyStats::*> kPhases[] = {
      {"sp_ef_ms", &SparsifyStats::ef_ms},
      {"sp_select_ms", &SparsifyStats::select_ms},
      {"sp_partition_ms", &SparsifyStats::partition_ms},
      {"sp_estimate_ms", &SparsifyStats::estimate_ms},
      {"sp_pack_ms", &SparsifyStats::pack_ms},
      {"sp_comm_ms", &SparsifyStats::comm_ms},
      {"sp_decode_ms", &SparsifyStats::decode_ms},
      {"sp_update_ms", &SparsifyStats::update_ms},
      {"sp_exchange_ms", &SparsifyStats::exchange_ms},
      {"sp_total_ms", &SparsifyStats::total_ms}};
  int64_t n = 0, k = 0, local = 0, global = 0, bytes = 0, largest = 0, padded = 0, filled = 0;
  double threshold = 0, residual_sq = 0;
  double phase[std::size(kPhases)] = {};
  for (const SparsifyStats& s : stats) {
    n += s.n;
    k += s.k;
    local += s.local_count;
    global += s.global_count;
    bytes += s.bytes_sent;
    padded += s.padded_slots;
    filled += s.counted_slots;
    residual_sq += s.residual_norm * s.residual_norm;
    for (size_t p = 0; p < std::size(kPhases); ++p) phase[p] += s.*kPhases[p].second;
    if (s.n > largest) {
      largest = s.n;
      threshold = s.threshold;
    }
  }
  row.push_back({"sp_k", k});
  row.push_back({"sp_local", local});
  row.push_back({"sp_global", global});
  row.push_back({"sp_density", n ? static_cast<double>(global) / n : 0.0});
  row.push_back({"sp_threshold", threshold});
  row.push_back({"sp_padding", filled ? static_cast<double>(padded) / filled - 1.0 : 0.0});
  for (size_t p = 0; p < std::size(kPhases); ++p) row.push_back({kPhases[p].first, phase[p]});
  row.push_back({"sp_residual_norm", std::sqrt(residual_sq)});
  row.push_back({"sp_bytes", bytes});
}

void broadcast_model(Layer& model, FlatParams& flat, Communicator& comm) {
  if (comm.size() == 1) return;
  comm.broadcast(flat.values(), 0);
  for (Buffer* b : collect_buffers(model)) comm.broadcast(b->value, 0);
}

std::string format_sparsifier_params(const std::map<std::string, std::string>& params) {
  std::string s;
  for (const auto& [key, value] : params) s += (s.empty() ? "" : " ") + key + "=" + value;
  return s;
}

namespace {
const char* kSparsifyState = "sparsify.state";
const char* kSparsifyStateBytes = "sparsify.state_bytes";
}  // namespace

std::vector<std::pair<std::string, Tensor>> gather_sparsify_state(const SparsifyHook& hook,
                                                                  Communicator& comm) {
  const std::vector<uint8_t> bytes = hook.save_state();
  const int P = comm.size();
  // Rows of equal width (the longest rank's), so the file holds a plain [P, words] tensor.
  Tensor len = Tensor::from_vector_i32({static_cast<int32_t>(bytes.size())}, {1});
  Tensor lens = Tensor::zeros({P}, DType::I32);
  if (P == 1)
    lens.copy_from(len);
  else
    comm.allgather(len, lens);
  int64_t words = 1;
  for (int i = 0; i < P; ++i) words = std::max<int64_t>(words, (lens.data<int32_t>()[i] + 3) / 4);
  Tensor row = Tensor::zeros({words}, DType::I32);
  std::memcpy(row.raw(), bytes.data(), bytes.size());
  Tensor all = Tensor::zeros({P, words}, DType::I32);
  if (P == 1) {
    all.copy_from(row.reshape({1, words}));
  } else {
    Tensor flat = all.reshape({P * words});
    comm.allgather(row, flat);
  }
  return {{kSparsifyState, all}, {kSparsifyStateBytes, lens}};
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

// False when the file holds no sparsifier state. A state of another number of ranks is
// re-split for this one (sparsify/resplit.h) or refused in one line.
bool restore_sparsify_state(SparsifyHook& hook, const std::string& path, Communicator& comm) {
  const TensorFile f = load_safetensors(path);
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
  if (old_world == comm.size()) {
    StateReader in = row(comm.rank());
    hook.load_state(in);
    return true;
  }
  std::vector<HookState> old;
  for (int q = 0; q < old_world; ++q) {
    StateReader in = row(q);
    old.push_back(read_hook_state(in));
  }
  StateWriter fresh;
  hook.sparsifier().save_state(fresh);
  const std::vector<uint8_t> bytes =
      write_hook_state(resplit_hook_state(old, comm.size(), comm.rank(), fresh.bytes(), path));
  StateReader in(bytes.data(), bytes.size(), what);
  in.set_new_world(comm.size());
  hook.load_state(in);
  report_resplit(hook, old, path, comm);
  return true;
}
}  // namespace

void resume_exchange(const TrainConfig& c, int64_t step, Reducer& reducer, SparsifyHook* sparsify,
                     Communicator& comm) {
  reducer.set_iteration(step);
  if (!sparsify) return;
  if (restore_sparsify_state(*sparsify, c.resume, comm))
    sparsify->check_bucket_plan(reducer.buckets());
  else if (comm.rank() == 0)
    std::fprintf(stderr, "note: %s has no sparsifier state; --sparsifier %s starts fresh\n",
                 c.resume.c_str(), c.sparsifier.c_str());
}

std::shared_ptr<BucketHook> make_exchange_hook(const TrainConfig& c,
                                               std::shared_ptr<SparsifyHook>& sparsify) {
  sparsify.reset();
  if (c.sparsifier == "none")
    return std::make_shared<AllreduceHook>(parse_precision(c.comm_dtype, "--comm-dtype"));
  SparsifierOptions so;
  so.density = c.density;
  so.seed = c.seed;
  so.params = c.sparsifier_params;
  sparsify =
      std::make_shared<SparsifyHook>(make_sparsifier(c.sparsifier, so), so, c.dense_warmup_iters);
  return sparsify;
}

}  // namespace st
