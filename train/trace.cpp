#include "train/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "core/emu/task_observer.h"
#include "core/error.h"
#include "layers/layer.h"

namespace st {

namespace {

// Display order of the track kinds, top to bottom: one training step reads downwards.
const char* const kKinds[] = {"data", "forward", "backward", "comm", "optimizer"};
constexpr int kOtherKind = 5;
// Chrome-trace ids: Perfetto treats pid 0 and tid 0 specially, so both start at 1, and
// tids are unique across ranks.
constexpr int kMaxTracks = 1000;
int pid_of(int rank) {
  return rank + 1;
}
int tid_of(int rank, int slot) {
  return pid_of(rank) * kMaxTracks + slot + 1;
}

// "comm" and "comm bucket 3" are both of kind comm; unknown names sort last.
int kind_of(const std::string& track) {
  for (int i = 0; i < kOtherKind; ++i) {
    const std::string k = kKinds[i];
    if (track == k || track.rfind(k + " ", 0) == 0) return i;
  }
  return kOtherKind;
}

void write_file(const std::string& path, const nlohmann::json& events) {
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

// Whole numbers (bucket ids, counts) print without a fraction.
nlohmann::json args_json(const TraceWriter::Args& args) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : args) {
    if (value == std::trunc(value) && std::fabs(value) < 0x1p53)
      j[key] = static_cast<int64_t>(value);
    else
      j[key] = value;
  }
  return j;
}

}  // namespace

void TraceWriter::sync_origin(Communicator& comm) {
  ST_CHECK(events_.empty(),
           "TraceWriter::sync_origin: call it before the first event (it moves time zero)");
  comm.barrier();
  origin_ = Clock::now();
}

void TraceWriter::span(const std::string& name, const std::string& track, Clock::time_point begin,
                       Clock::time_point end, Args args) {
  events_.push_back({name, track, begin, end, false, std::move(args)});
}

void TraceWriter::instant(const std::string& name, const std::string& track, Clock::time_point at,
                          Args args) {
  events_.push_back({name, track, at, at, true, std::move(args)});
}

std::string TraceWriter::events_json() const {
  // Tracks in first-use order, then stably by kind: the display order.
  std::vector<std::string> tracks;
  for (const Event& e : events_)
    if (std::find(tracks.begin(), tracks.end(), e.track) == tracks.end()) tracks.push_back(e.track);
  std::stable_sort(tracks.begin(), tracks.end(), [](const std::string& a, const std::string& b) {
    return kind_of(a) < kind_of(b);
  });
  ST_CHECK(static_cast<int>(tracks.size()) < kMaxTracks, "trace: ", tracks.size(),
           " tracks, at most ", kMaxTracks - 1);
  const int pid = pid_of(rank_);
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"name", "process_name"},
                 {"ph", "M"},
                 {"pid", pid},
                 {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  out.push_back({{"name", "process_sort_index"},
                 {"ph", "M"},
                 {"pid", pid},
                 {"args", {{"sort_index", rank_}}}});
  for (size_t slot = 0; slot < tracks.size(); ++slot) {
    const int tid = tid_of(rank_, static_cast<int>(slot));
    out.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", pid},
                   {"tid", tid},
                   {"args", {{"name", tracks[slot]}}}});
    out.push_back({{"name", "thread_sort_index"},
                   {"ph", "M"},
                   {"pid", pid},
                   {"tid", tid},
                   {"args", {{"sort_index", slot}}}});
  }
  auto us = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  };
  for (const Event& e : events_) {
    const auto slot = std::find(tracks.begin(), tracks.end(), e.track) - tracks.begin();
    nlohmann::json j = {{"name", e.name},
                        {"cat", e.track},
                        {"pid", pid},
                        {"tid", tid_of(rank_, static_cast<int>(slot))},
                        {"ts", us(e.begin)}};
    if (e.instant) {
      j["ph"] = "i";
      j["s"] = "t";  // drawn on its thread's track, not across the process
    } else {
      j["ph"] = "X";
      j["dur"] = us(e.end) - us(e.begin);
    }
    if (!e.args.empty()) j["args"] = args_json(e.args);
    out.push_back(std::move(j));
  }
  return out.dump();
}

void TraceWriter::write(const std::string& path) const {
  write_file(path, nlohmann::json::parse(events_json()));
}

void TraceWriter::write_all_ranks(const std::string& path, Communicator& comm) const {
  const std::vector<std::string> parts = comm.gather_bytes(events_json(), 0);
  if (comm.rank() != 0) return;
  nlohmann::json events = nlohmann::json::array();
  for (const std::string& part : parts)
    for (nlohmann::json& e : nlohmann::json::parse(part)) events.push_back(std::move(e));
  write_file(path, events);
}

EmuStreamTracks::~EmuStreamTracks() {
  if (recording_) emu::set_task_observer(nullptr);
}

void EmuStreamTracks::start() {
  if (recording_) return;
  recording_ = true;
  starter_ = std::this_thread::get_id();
  // Calls are serialised by the observer's lock, and stop_into() takes that lock before
  // it reads runs_: no lock of our own.
  emu::set_task_observer([this](const emu::TaskRun& r) {
    runs_.push_back(
        {r.stream, r.stream_kind, r.what, r.queued_by == starter_, r.queued, r.begin, r.end});
  });
}

std::string EmuStreamTracks::track_of(const Run& run) {
  for (const auto& [stream, track] : tracks_)
    if (stream == run.stream) return track;
  std::string track = run.stream_kind == "copy"      ? "emu copy stream"
                      : run.stream_kind != "default" ? "emu collective stream"
                      : run.by_starter               ? "emu compute stream"
                                                     : "emu comm stream";
  for (const auto& taken : tracks_)
    if (taken.second == track) track.append(" ").append(std::to_string(run.stream));
  tracks_.emplace_back(run.stream, track);
  return track;
}

void EmuStreamTracks::stop_into(TraceWriter& trace) {
  if (!recording_) return;
  emu::remove_task_observer_when_stamped_reported();
  recording_ = false;
  for (const Run& r : runs_) {
    // "a layer" -> "layer": the callers name work for error messages.
    const std::string name(r.what.c_str() + (r.what.rfind("a ", 0) == 0 ? 2 : 0));
    const TraceWriter::Args args = {
        {"queued_ms", std::chrono::duration<double, std::milli>(r.begin - r.queued).count()}};
    if (name == "record event")
      trace.instant(name, track_of(r), r.begin, args);
    else
      trace.span(name, track_of(r), r.begin, r.end, args);
  }
  runs_.clear();
}

void trace_reducer_timeline(TraceWriter& trace, const Reducer& reducer) {
  auto at = [&](double ms) {
    return reducer.begin_time() + std::chrono::duration_cast<TraceWriter::Clock::duration>(
                                      std::chrono::duration<double, std::milli>(ms));
  };
  const std::string exchange = reducer.hook().name();
  for (const BucketTimes& t : reducer.bucket_times()) {
    const std::string id = "bucket " + std::to_string(t.bucket);
    const TraceWriter::Args args = {{"bucket", t.bucket},
                                    {"floats", static_cast<double>(t.numel)},
                                    {"iteration", static_cast<double>(t.iteration)}};
    if (t.ready_ms >= 0) trace.instant("ready " + id, "backward", at(t.ready_ms), args);
    if (t.launch_ms >= 0) trace.instant("launch " + id, "comm", at(t.launch_ms), args);
    if (t.wait_end_ms >= 0)
      trace.span("wait for peers " + id, "comm", at(t.wait_begin_ms), at(t.wait_end_ms), args);
    if (t.exchange_end_ms >= 0)
      trace.span(exchange + " " + id, "comm", at(t.exchange_begin_ms), at(t.exchange_end_ms), args);
  }
}

void trace_layer_backward(Layer& model, TraceWriter& trace, const bool& tracing) {
  // Backward runs on the training thread only; the stack pairs begin/end per layer.
  auto stack = std::make_shared<std::vector<TraceWriter::Clock::time_point>>();
  model.set_backward_observer(
      [&trace, &tracing, stack](const std::string& path, bool begin) {
        if (!tracing) return;
        if (begin) {
          stack->push_back(TraceWriter::Clock::now());
        } else if (!stack->empty()) {
          trace.span(path, "backward", stack->back(), TraceWriter::Clock::now());
          stack->pop_back();
        }
      },
      "");
}

}  // namespace st
