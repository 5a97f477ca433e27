// What the stream executors ran and when, for a timeline of the emulated device's streams
// (train/trace.h's stream tracks). One process-wide observer at a time: while one is set,
// every task queued on any stream is stamped when queued, and its executor reports it after
// it ran. Without an observer a task costs one relaxed atomic load when it is queued.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace st::emu {

struct TaskRun {
  using Clock = std::chrono::steady_clock;
  int stream = 0;                // the stream's number in the process, in creation order
  const char* stream_kind = "";  // "default" (a host thread's own), "copy" (an upload's), ""
  // "kernel", "copy", "record event", "wait for event", or what a caller of
  // run_in_stream_order named it ("a layer"); valid during the observer's call only.
  const char* what = "";
  std::thread::id queued_by;             // the host thread that queued it
  Clock::time_point queued, begin, end;  // begin: the executor took it (a delay runs inside)
};

using TaskObserver = std::function<void(const TaskRun&)>;

namespace detail {
inline std::atomic<bool> task_observer_set{false};
inline std::mutex task_observer_mu;
inline TaskObserver task_observer;
}  // namespace detail

// Replaces the observer (nullptr: none). When it returns, no call of the previous observer
// is running any more. The observer runs on executor threads, one call at a time; it must
// not queue work on a stream.
inline void set_task_observer(TaskObserver observer) {
  std::lock_guard<std::mutex> lock(detail::task_observer_mu);
  detail::task_observer = std::move(observer);
  detail::task_observer_set.store(static_cast<bool>(detail::task_observer),
                                  std::memory_order_relaxed);
}

// Whether tasks queued now are stamped.
inline bool observing_tasks() {
  return detail::task_observer_set.load(std::memory_order_relaxed);
}

// Called by an executor after a stamped task ran; dropped when the observer is gone.
inline void report_task(const TaskRun& run) {
  std::lock_guard<std::mutex> lock(detail::task_observer_mu);
  if (detail::task_observer) detail::task_observer(run);
}

}  // namespace st::emu
