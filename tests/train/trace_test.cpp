// The Chrome trace: one writer's track order and metadata, the bytes gather it travels
// by, the reducer's per-bucket stamps (ready, launch, wait for peers, exchange) from
// every rank in one file, and the emulated device's stream tracks. Runs on one process and on two
// under mpirun, where rank 1 arrives late on purpose.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "comm/communicator.h"
#include "comm/local_communicator.h"
#include "comm/reducer.h"
#include "core/emu/launch.h"
#include "core/emu/runtime.h"
#include "core/emu/stream.h"
#include "layers/conv2d.h"
#include "layers/flatten.h"
#include "layers/linear.h"
#include "layers/pointwise.h"
#include "layers/sequential.h"
#include "layers/softmax_cross_entropy.h"
#include "tests/comm/mpi_test_run.h"
#include "tests/gradcheck.h"
#include "train/trace.h"

namespace st::test {
namespace {

using Clock = TraceWriter::Clock;
using Json = nlohmann::json;
using std::chrono::milliseconds;

std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() /
          (stem + "_" + std::to_string(::getpid()) + ".json"))
      .string();
}

Json read_trace(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  Json j = Json::parse(in);
  std::filesystem::remove(path);
  return j.at("traceEvents");
}

// The metadata event `what` ("process_name", "thread_name") for pid (and tid).
const Json* metadata(const Json& events, const std::string& what, int pid, int tid = -1) {
  for (const Json& e : events)
    if (e["ph"] == "M" && e["name"] == what && e["pid"] == pid &&
        (tid < 0 || e.value("tid", -1) == tid))
      return &e;
  return nullptr;
}

// Rank q sends q copies of the letter 'a' + q (rank 0 sends nothing); only the root
// receives them.
TEST(TraceAllRanks, GatherBytesReachesTheRootOnly) {
  Communicator& c = world();
  const int p = c.size(), root = p - 1;
  const std::string mine(static_cast<size_t>(c.rank()), static_cast<char>('a' + c.rank()));
  const std::vector<std::string> got = c.gather_bytes(mine, root);
  if (c.rank() != root) {
    EXPECT_TRUE(got.empty());
    return;
  }
  ASSERT_EQ(got.size(), static_cast<size_t>(p));
  for (int q = 0; q < p; ++q)
    EXPECT_EQ(got[q], std::string(static_cast<size_t>(q), static_cast<char>('a' + q))) << q;
}

TEST(TraceWriter, TracksInStepOrderWithProcessAndThreadNames) {
  TraceWriter w(0);
  const Clock::time_point t0 = Clock::now();
  // Recorded out of display order on purpose; "custom" is a name the writer does not know.
  w.span("sgd step", "optimizer", t0 + milliseconds(5), t0 + milliseconds(6));
  w.span("my work", "custom", t0 + milliseconds(1), t0 + milliseconds(2));
  w.instant("launch bucket 0", "comm", t0 + milliseconds(3), {{"bucket", 0}});
  w.span("exchange", "comm bucket 1", t0 + milliseconds(3), t0 + milliseconds(4));
  w.span("layer", "backward", t0 + milliseconds(2), t0 + milliseconds(3));
  w.span("data wait", "data", t0, t0 + milliseconds(1));
  w.span("forward", "forward", t0 + milliseconds(1), t0 + milliseconds(2));
  const std::string path = temp_path("trace_unit");
  w.write(path);
  const Json events = read_trace(path);

  const Json* process = metadata(events, "process_name", 1);  // rank 0 is pid 1
  ASSERT_NE(process, nullptr);
  EXPECT_EQ((*process)["args"]["name"], "rank 0");
  // Track names by their sort index: the display order.
  std::map<int, std::string> name_of_tid, by_sort_index;
  for (const Json& e : events)
    if (e["ph"] == "M" && e["name"] == "thread_name")
      name_of_tid[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
  for (const auto& [tid, name] : name_of_tid) {
    const Json* sort = metadata(events, "thread_sort_index", 1, tid);
    ASSERT_NE(sort, nullptr) << name;
    by_sort_index[(*sort)["args"]["sort_index"].get<int>()] = name;
  }
  std::vector<std::string> order;
  for (const auto& [index, name] : by_sort_index) order.push_back(name);
  EXPECT_EQ(order, std::vector<std::string>({"data", "forward", "backward", "comm", "comm bucket 1",
                                             "optimizer", "custom"}));

  int spans = 0;
  double data_ts = -1, sgd_ts = -1;
  for (const Json& e : events) {
    if (e["ph"] == "M") continue;
    EXPECT_EQ(e["pid"], 1);
    EXPECT_EQ(name_of_tid.at(e["tid"].get<int>()), e["cat"]) << "event on its track's thread";
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    if (e["ph"] == "X") {
      ++spans;
      EXPECT_NEAR(e["dur"].get<double>(), 1000.0, 1e-6) << e["name"];
    } else {
      EXPECT_EQ(e["ph"], "i");
      EXPECT_EQ(e["s"], "t");
      EXPECT_EQ(e["args"]["bucket"], 0);
    }
    if (e["name"] == "data wait") data_ts = e["ts"].get<double>();
    if (e["name"] == "sgd step") sgd_ts = e["ts"].get<double>();
  }
  EXPECT_EQ(spans, 6);
  EXPECT_NEAR(sgd_ts - data_ts, 5000.0, 1e-6) << "timestamps in microseconds";
}

TEST(TraceWriter, OneProcessWritesTheSameThroughWriteAllRanks) {
  LocalCommunicator local;
  TraceWriter w(0);
  w.sync_origin(local);
  w.span("forward", "forward", Clock::now(), Clock::now() + milliseconds(1));
  const std::string a = temp_path("trace_one"), b = temp_path("trace_all");
  w.write(a);
  w.write_all_ranks(b, local);
  EXPECT_EQ(read_trace(a), read_trace(b));
  // Moving time zero after events were recorded would make them lie.
  EXPECT_THROW(w.sync_origin(local), Error);
}

LayerPtr make_net(uint64_t seed) {
  Rng rng(seed);
  auto net = std::make_unique<Sequential>();
  net->add("conv1", std::make_unique<Conv2d>(3, 8, 3, 1, 1, true, rng));
  net->add("relu1", std::make_unique<ReLU>());
  net->add("conv2", std::make_unique<Conv2d>(8, 8, 3, 2, 1, true, rng));
  net->add("flat", std::make_unique<Flatten>());
  net->add("fc", std::make_unique<Linear>(8 * 4 * 4, 5, true, rng));
  return net;
}

// One event per (rank, iteration, bucket, kind) from the gathered file.
struct Stamp {
  double ts = -1, dur = 0;
  double end() const { return ts + dur; }
};
using StampKey = std::tuple<int, int, int, std::string>;  // pid, iteration, bucket, kind

std::map<StampKey, Stamp> bucket_stamps(const Json& events) {
  std::map<StampKey, Stamp> out;
  for (const Json& e : events) {
    if (e["ph"] == "M" || !e.contains("args") || !e["args"].contains("bucket")) continue;
    const std::string name = e["name"];
    const std::string kind = name.substr(0, name.find(" bucket"));
    const StampKey key{e["pid"].get<int>(), e["args"]["iteration"].get<int>(),
                       e["args"]["bucket"].get<int>(), kind};
    EXPECT_EQ(out.count(key), 0u) << "duplicate " << name;
    out[key] = {e["ts"].get<double>(), e.value("dur", 0.0)};
  }
  return out;
}

// Iteration 0 untraced, 1 and 2 traced with rank 1 arriving 50 ms late; buckets launch
// at finalize (defer_until_finalize), so every bucket's ready and launch differ.
TEST(TraceAllRanks, BucketStampsAndPeerWaitsOfEveryRankInOneFile) {
  Communicator& c = world();
  const int p = c.size(), r = c.rank(), late_ms = 50;
  LayerPtr net = make_net(3);
  FlatParams flat(*net, Device::cpu());
  ReducerOptions ro;
  ro.first_bucket_mb = 1e-3;
  ro.bucket_cap_mb = 4e-3;
  ro.defer_until_finalize = true;
  Reducer reducer(flat, c, std::make_shared<AllreduceHook>(), ro);
  const int buckets = static_cast<int>(reducer.buckets().size());
  ASSERT_GE(buckets, 3);
  TraceWriter trace(r);
  trace.sync_origin(c);
  Rng data(11);
  SoftmaxCrossEntropy ce;
  for (int it = 0; it < 3; ++it) {
    const bool traced = it > 0;
    reducer.set_tracing(traced);
    ce.forward(net->forward(random_tensor({4, 3, 8, 8}, data)),
               Tensor::from_vector_i32({0, 1, 2, 3}, {4}));
    flat.zero_grads();
    if (traced && r == 1) std::this_thread::sleep_for(milliseconds(late_ms));
    reducer.begin_backward();
    net->backward(ce.backward());
    const double backward_end = reducer.ms_since_begin();
    reducer.finalize();
    for (const BucketTimes& t : reducer.bucket_times()) {
      EXPECT_EQ(t.iteration, it);
      EXPECT_GE(t.ready_ms, 0);
      EXPECT_LE(t.ready_ms, backward_end) << "ready is the last gradient, during backward";
      EXPECT_GE(t.launch_ms, backward_end) << "deferred buckets launch in finalize()";
      EXPECT_EQ(t.wait_begin_ms >= 0, traced) << "the barrier belongs to traced iterations only";
      EXPECT_GE(t.exchange_end_ms, t.exchange_begin_ms);
    }
    if (traced) trace_reducer_timeline(trace, reducer);
  }
  const std::string path = r == 0 ? temp_path("trace_ranks") : "";
  trace.write_all_ranks(path, c);
  if (r != 0) return;
  const Json events = read_trace(path);

  for (int q = 0; q < p; ++q) {
    const Json* process = metadata(events, "process_name", q + 1);
    ASSERT_NE(process, nullptr) << "rank " << q;
    EXPECT_EQ((*process)["args"]["name"], "rank " + std::to_string(q));
  }
  for (const Json& e : events) {
    if (e["ph"] == "M") continue;
    EXPECT_GE(e["ts"].get<double>(), 0.0) << e["name"];
  }
  const std::map<StampKey, Stamp> s = bucket_stamps(events);
  EXPECT_EQ(s.size(), static_cast<size_t>(p * 2 * buckets * 4)) << "4 stamps per bucket";
  const double eps = 1e-3;  // microseconds
  for (int pid = 1; pid <= p; ++pid)
    for (int it = 1; it <= 2; ++it)
      for (int b = 0; b < buckets; ++b) {
        const Stamp ready = s.at({pid, it, b, "ready"}), launch = s.at({pid, it, b, "launch"}),
                    wait = s.at({pid, it, b, "wait for peers"}), ex = s.at({pid, it, b, "dense"});
        EXPECT_LE(ready.ts, launch.ts + eps);
        EXPECT_LE(launch.ts, wait.ts + eps);
        EXPECT_LE(wait.end(), ex.ts + eps);
        EXPECT_LE(launch.ts, ex.end() + eps);
      }
  if (p < 2) return;
  for (int it = 1; it <= 2; ++it) {
    // Rank 0 waited in bucket 0's barrier for the late rank 1; that is not transfer.
    const Stamp wait0 = s.at({1, it, 0, "wait for peers"}),
                wait1 = s.at({2, it, 0, "wait for peers"});
    EXPECT_GE(wait0.dur, 0.5 * late_ms * 1e3) << "iteration " << it;
    EXPECT_LT(s.at({1, it, 0, "dense"}).dur, wait0.dur);
    // Both ranks leave that barrier together; aligned origins put them close on one axis.
    EXPECT_NEAR(wait0.end(), wait1.end(), 20e3) << "clock alignment, iteration " << it;
  }
}

// Per stream track, its spans and marks in recording order (the order they ran), each
// task's time in the queue checked to be non-negative.
struct StreamEvent {
  std::string name;
  double ts = 0, end = 0;
};
std::map<std::string, std::vector<StreamEvent>> stream_events(const Json& events) {
  std::map<int, std::string> track_of;
  for (const Json& e : events)
    if (e["ph"] == "M" && e["name"] == "thread_name")
      track_of[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
  std::map<std::string, std::vector<StreamEvent>> out;
  for (const Json& e : events) {
    if (e["ph"] == "M") continue;
    const std::string track = track_of.at(e["tid"].get<int>());
    if (track.rfind("emu ", 0) != 0) continue;
    EXPECT_GE(e["args"]["queued_ms"].get<double>(), 0.0) << e["name"];
    const double ts = e["ts"].get<double>();
    out[track].push_back({e["name"].get<std::string>(), ts, ts + e.value("dur", 0.0)});
  }
  return out;
}

// Every emu stream task delayed by 20 ms: the host queues a kernel on its own stream and
// moves on at once; a second stream waits for it through an event, then runs its own
// kernel; another thread runs a kernel on its default stream. Only what ran between
// start() and stop_into() is on the tracks, each span no earlier than its queueing.
TEST(EmuStreamTracks, EachStreamsTasksOnItsTrackAfterTheHostQueuedThem) {
  constexpr int kDelayUs = 20000;
  emu::set_task_delay_us(kDelayUs);
  emu::Stream& compute = emu::current_stream(0);
  emu::launch(0, [] {});  // before start(): not recorded
  compute.synchronize();
  TraceWriter w(0);
  EmuStreamTracks tracks;
  tracks.start();
  const Clock::time_point queued = Clock::now();
  emu::launch(0, [] {});
  w.instant("queued", "forward", queued);
  emu::Stream side(0);
  emu::Event ready;
  ready.record(compute);
  side.wait(ready);
  side.enqueue([] {});
  side.synchronize();
  std::thread other([] {
    emu::launch(0, [] {});
    emu::current_stream(0).synchronize();
  });
  other.join();
  tracks.stop_into(w);
  emu::launch(0, [] {});  // after stop_into(): not recorded either
  compute.synchronize();
  tracks.stop_into(w);
  emu::set_task_delay_us(0);

  auto events = stream_events(Json::parse(w.events_json()));
  ASSERT_EQ(events.size(), 3u) << "compute, collective (the side stream) and comm tracks";
  const auto& on_compute = events["emu compute stream"];
  const auto& on_side = events["emu collective stream"];
  const auto& on_other = events["emu comm stream"];
  ASSERT_EQ(on_compute.size(), 2u) << "the kernel and the event record";
  const StreamEvent kernel = on_compute[0];
  EXPECT_EQ(kernel.name, "kernel");
  EXPECT_EQ(on_compute[1].name, "record event");
  double queued_ts = -1;
  for (const Json& e : Json::parse(w.events_json()))
    if (e["name"] == "queued") queued_ts = e["ts"].get<double>();
  ASSERT_GE(queued_ts, 0.0);
  EXPECT_GE(kernel.ts, queued_ts) << "a stream runs what was queued, not earlier";
  EXPECT_GE(kernel.end - kernel.ts, 0.9 * kDelayUs) << "the delay runs inside the span";
  EXPECT_GE(on_compute[1].ts, kernel.end) << "in order on one stream";
  ASSERT_EQ(on_side.size(), 2u);
  EXPECT_EQ(on_side[0].name, "wait for event");
  EXPECT_GE(on_side[0].end, kernel.end) << "the side stream waited for the compute kernel";
  EXPECT_EQ(on_side[1].name, "kernel");
  EXPECT_GE(on_side[1].ts, on_side[0].end);
  ASSERT_EQ(on_other.size(), 1u);
  EXPECT_EQ(on_other[0].name, "kernel");
}

// A stream runs behind the host: what the host queued during the traced window is on the
// tracks even when it runs after the host has stopped recording (the last bucket's
// ready event of a traced step, say).
TEST(EmuStreamTracks, WhatTheHostQueuedBeforeStopIsOnTheTracksThoughItRunsAfter) {
  constexpr int kDelayUs = 20000;
  emu::set_task_delay_us(kDelayUs);
  emu::Stream& compute = emu::current_stream(0);
  TraceWriter w(0);
  EmuStreamTracks tracks;
  tracks.start();
  emu::launch(0, [] {});
  emu::Event ready;
  ready.record(compute);
  EXPECT_FALSE(ready.ready()) << "the kernel's delay is still running";
  tracks.stop_into(w);
  emu::launch(0, [] {});  // after stop_into(): not recorded
  compute.synchronize();
  emu::set_task_delay_us(0);

  auto events = stream_events(Json::parse(w.events_json()));
  ASSERT_EQ(events.size(), 1u);
  const auto& on_compute = events["emu compute stream"];
  ASSERT_EQ(on_compute.size(), 2u) << "the kernel and the event record";
  EXPECT_EQ(on_compute[0].name, "kernel");
  EXPECT_EQ(on_compute[1].name, "record event");
}

}  // namespace
}  // namespace st::test
