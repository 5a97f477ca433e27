#include "train/trace.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace st {

namespace {
const char* kTracks[] = {"forward", "backward", "comm", "optimizer", "data"};
}

int TraceWriter::tid(const std::string& track) const {
  for (int i = 0; i < 5; ++i)
    if (track == kTracks[i]) return i;
  return 5;
}

void TraceWriter::span(const std::string& name, const std::string& track, Clock::time_point begin,
                       Clock::time_point end) {
  events_.push_back({name, track, us(begin), us(end) - us(begin), false});
}

void TraceWriter::instant(const std::string& name, const std::string& track, Clock::time_point at) {
  events_.push_back({name, track, us(at), 0, true});
}

void TraceWriter::write(const std::string& path) const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank_},
                    {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  for (int i = 0; i < 5; ++i)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank_},
                      {"tid", i},
                      {"args", {{"name", kTracks[i]}}}});
  for (const Event& e : events_) {
    nlohmann::json j = {
        {"name", e.name}, {"cat", e.track}, {"pid", rank_}, {"tid", tid(e.track)}, {"ts", e.ts_us}};
    if (e.instant) {
      j["ph"] = "i";
      j["s"] = "t";
    } else {
      j["ph"] = "X";
      j["dur"] = e.dur_us;
    }
    events.push_back(std::move(j));
  }
  const std::string tmp = path + ".tmp";
  {
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    ST_CHECK(f != nullptr, "--trace ", path, ": cannot write ", tmp);
    const std::string text =
        nlohmann::json({{"traceEvents", events}, {"displayTimeUnit", "ms"}}).dump();
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    std::fclose(f);
    ST_CHECK(ok, "--trace ", path, ": write failed");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace st
