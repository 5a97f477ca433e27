#include "train/train_common.h"

#include <sys/resource.h>

#include <cstdio>

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

void add_sparsify_metrics(const std::vector<SparsifyStats>& stats, MetricRow& row) {
  int64_t n = 0, k = 0, local = 0, global = 0, bytes = 0, largest = 0;
  double select_ms = 0, exchange_ms = 0, padding = 0, threshold = 0;
  for (const SparsifyStats& s : stats) {
    n += s.n;
    k += s.k;
    local += s.local_count;
    global += s.global_count;
    bytes += s.bytes_sent;
    select_ms += s.select_ms;
    exchange_ms += s.exchange_ms;
    padding += s.padding_overhead;
    if (s.n > largest) {
      largest = s.n;
      threshold = s.threshold;
    }
  }
  const double buckets = stats.empty() ? 1.0 : static_cast<double>(stats.size());
  row.push_back({"sp_k", k});
  row.push_back({"sp_local", local});
  row.push_back({"sp_global", global});
  row.push_back({"sp_density", n ? static_cast<double>(global) / n : 0.0});
  row.push_back({"sp_threshold", threshold});
  row.push_back({"sp_padding", padding / buckets});
  row.push_back({"sp_select_ms", select_ms});
  row.push_back({"sp_exchange_ms", exchange_ms});
  row.push_back({"sp_bytes", bytes});
}

void broadcast_model(Layer& model, FlatParams& flat, Communicator& comm) {
  if (comm.size() == 1) return;
  comm.broadcast(flat.values(), 0);
  for (Buffer* b : collect_buffers(model)) comm.broadcast(b->value, 0);
}

void trace_reducer_timeline(TraceWriter& trace, const Reducer& reducer) {
  auto at = [&](double ms) {
    return reducer.begin_time() + std::chrono::duration_cast<TraceWriter::Clock::duration>(
                                      std::chrono::duration<double, std::milli>(ms));
  };
  for (const TimelineSpan& sp : reducer.timeline()) {
    if (sp.end_ms > sp.begin_ms)
      trace.span(sp.name, sp.track, at(sp.begin_ms), at(sp.end_ms));
    else
      trace.instant(sp.name, sp.track, at(sp.begin_ms));
  }
}

std::string format_sparsifier_params(const std::map<std::string, std::string>& params) {
  std::string s;
  for (const auto& [key, value] : params) s += (s.empty() ? "" : " ") + key + "=" + value;
  return s;
}

}  // namespace st
