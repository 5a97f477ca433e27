// Chrome-trace timeline of a few training iterations (open in ui.perfetto.dev or
// chrome://tracing; docs/TRACE.md explains how to read one).
//
// Every rank records its own events into a TraceWriter; write_all_ranks() gathers them
// into one file with one process per rank ("rank R", pid R + 1 because Perfetto treats
// pid 0 specially) and one thread per track. Tracks are ordered data, forward, backward,
// comm, optimizer, then any other name in the order first used; a track named "<kind>
// <detail>" ("comm bucket 3") sorts with its kind.
//
// Clocks: each rank stamps with its own steady_clock. sync_origin() makes every rank take
// its time zero right after a common barrier, so ranks on different machines share one
// time axis; the ranks leave a barrier at slightly different moments, so two ranks' times
// can disagree by up to about one barrier latency (microseconds on one host, tens of
// microseconds across a network), plus the machines' clock-rate difference accumulated
// since the origin (hence: take it right before the traced iterations).
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace st {

class Communicator;
class Layer;
class Reducer;

class TraceWriter {
 public:
  using Clock = std::chrono::steady_clock;
  // Numbers shown with an event when it is selected (bucket id, floats, iteration).
  using Args = std::vector<std::pair<std::string, double>>;

  // The origin is the construction time until sync_origin() replaces it.
  explicit TraceWriter(int rank) : rank_(rank), origin_(Clock::now()) {}

  // Collective, once, before the first event (best right before the first traced
  // iteration): every rank takes its origin right after a barrier on `comm`. Blocking: no
  // asynchronous work may be in flight.
  void sync_origin(Communicator& comm);

  // A complete span on `track`; any track name works (see the ordering above).
  void span(const std::string& name, const std::string& track, Clock::time_point begin,
            Clock::time_point end, Args args = {});
  // A point in time on `track` (drawn as a mark on that thread).
  void instant(const std::string& name, const std::string& track, Clock::time_point at,
               Args args = {});
  bool empty() const { return events_.empty(); }

  // Collective: every rank calls it at the same point (between iterations: it gathers
  // over `comm` with blocking calls); rank 0 writes every rank's events to `path` as
  // {"traceEvents": [...]}, atomically (temp file + rename). Other ranks write nothing.
  void write_all_ranks(const std::string& path, Communicator& comm) const;
  // This rank alone, for a single process without a communicator.
  void write(const std::string& path) const;
  // This rank's events as a JSON array of Chrome trace events: process and track
  // metadata first, then the events in recording order; the piece write_all_ranks gathers.
  std::string events_json() const;

 private:
  struct Event {
    std::string name, track;
    Clock::time_point begin, end;
    bool instant;
    Args args;
  };
  int rank_;
  Clock::time_point origin_;
  std::vector<Event> events_;
};

// The emulated device's streams as tracks (--device emu): between start() and stop_into(),
// every task a stream executor runs (core/emu/task_observer.h) is recorded, and
// stop_into() adds it to a trace as a span on its stream's track, named by the work
// ("layer", "kernel", "copy", "wait for event", ...; an event record is a mark), with the
// milliseconds it waited in the queue ("queued_ms"). Tracks: "emu compute stream" (the
// default stream of the thread that called start(), the training thread), "emu comm
// stream" (another thread's default stream: the communication thread's), "emu collective
// stream" (a stream of its own, as the emulated collective's), "emu copy stream" (input
// uploads); a second stream of one kind gets its number appended. Costs nothing unless
// started; one recorder at a time per process.
class EmuStreamTracks {
 public:
  EmuStreamTracks() = default;
  ~EmuStreamTracks();
  EmuStreamTracks(const EmuStreamTracks&) = delete;
  EmuStreamTracks& operator=(const EmuStreamTracks&) = delete;

  void start();
  // Stops recording and moves what was recorded into `trace`: waits until every task
  // queued while recording has run, so the tail of a traced step that the streams ran
  // after the host moved on is there too. A no-op when not started.
  void stop_into(TraceWriter& trace);

 private:
  struct Run {
    int stream;
    std::string stream_kind, what;
    bool by_starter;  // queued by the thread that called start()
    TraceWriter::Clock::time_point queued, begin, end;
  };
  std::string track_of(const Run& run);

  bool recording_ = false;
  std::thread::id starter_;
  std::vector<Run> runs_;                            // filled on executor threads
  std::vector<std::pair<int, std::string>> tracks_;  // stream number -> track
};

// Adds the reducer's last iteration to `trace`, per bucket: "ready bucket B" on the
// backward track when its last gradient became ready; on the comm track "launch bucket B"
// when it was handed to the communication thread, "wait for peers bucket B" (traced
// iterations only, see Reducer::set_tracing) and the exchange span. Call it after
// finalize() of each traced iteration.
void trace_reducer_timeline(TraceWriter& trace, const Reducer& reducer);
// Adds every layer's backward to `trace` as a span on the backward track while `tracing`
// is true (the layers' spans nest under the step's backward span).
void trace_layer_backward(Layer& model, TraceWriter& trace, const bool& tracing);

}  // namespace st
