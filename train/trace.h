// Chrome-trace timeline (open in Perfetto or chrome://tracing): one process per rank,
// one track per kind of work (forward, backward per layer, communication per bucket,
// optimiser), so the overlap of backward and communication is visible.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace st {

class TraceWriter {
 public:
  explicit TraceWriter(int rank) : rank_(rank), origin_(std::chrono::steady_clock::now()) {}
  using Clock = std::chrono::steady_clock;

  // A complete span on `track` ("forward", "backward", "comm", "optimizer").
  void span(const std::string& name, const std::string& track, Clock::time_point begin,
            Clock::time_point end);
  void instant(const std::string& name, const std::string& track, Clock::time_point at);
  bool empty() const { return events_.empty(); }
  // Writes {"traceEvents": [...]} to path (atomically: temp file + rename).
  void write(const std::string& path) const;

 private:
  struct Event {
    std::string name, track;
    double ts_us, dur_us;
    bool instant;
  };
  int tid(const std::string& track) const;
  double us(Clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  }
  int rank_;
  Clock::time_point origin_;
  std::vector<Event> events_;
};

}  // namespace st
