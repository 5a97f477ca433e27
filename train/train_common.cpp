#include "train/train_common.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

#include "sparsify/registry.h"
#include "train/flags.h"

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
  int64_t domain = 0;
  for (const SparsifyStats& s : stats) {
    n += s.n;
    domain += s.domain > 0 ? s.domain : s.n;
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
  row.push_back({"sp_density", domain ? static_cast<double>(global) / domain : 0.0});
  row.push_back({"sp_threshold", threshold});
  row.push_back({"sp_padding", filled ? static_cast<double>(padded) / filled - 1.0 : 0.0});
  for (size_t p = 0; p < std::size(kPhases); ++p) row.push_back({kPhases[p].first, phase[p]});
  row.push_back({"sp_residual_norm", std::sqrt(residual_sq)});
  row.push_back({"sp_bytes", bytes});
}

void broadcast_model(Layer& model, FlatParams& flat, Communicator& comm) {
  if (comm.size() == 1) return;
  comm.broadcast(flat.values(), 0);
  broadcast_buffers(model, comm);
}

void broadcast_buffers(Layer& model, Communicator& comm) {
  if (comm.size() == 1) return;
  for (Buffer* b : collect_buffers(model)) comm.broadcast(b->value, 0);
}

std::string format_sparsifier_params(const std::map<std::string, std::string>& params) {
  std::string s;
  for (const auto& [key, value] : params) s += (s.empty() ? "" : " ") + key + "=" + value;
  return s;
}

std::shared_ptr<BucketHook> make_exchange_hook(const TrainConfig& c,
                                               std::shared_ptr<SparsifyHook>& sparsify) {
  sparsify.reset();
  if (c.sparsifier == "none")
    return std::make_shared<AllreduceHook>(
        parse_precision(c.comm_dtype, flag_label(flag_of(&TrainConfig::comm_dtype)).c_str()));
  SparsifierOptions so;
  so.density = c.density;
  so.seed = c.seed;
  so.params = c.sparsifier_params;
  sparsify =
      std::make_shared<SparsifyHook>(make_sparsifier(c.sparsifier, so), so, c.dense_warmup_iters);
  return sparsify;
}

}  // namespace st
