// What the stream executors ran and when, for a timeline of the emulated device's streams
// (train/trace.h's stream tracks). One process-wide observer at a time: while one is set,
// every task queued on any stream is stamped when queued, and its executor reports it after
// it ran (remove_task_observer_when_stamped_reported waits for those reports).
// Without an observer a task costs one relaxed atomic load when it is queued.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
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
inline std::condition_variable all_stamped_reported;
inline int64_t stamped_not_reported = 0;  // under task_observer_mu
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

// Removes the observer once every task stamped so far has run and been reported: a
// stream runs behind the host that queued its work, so the tasks a host queued in a
// traced step may not have run when the host ends the step. Tasks queued from now on
// are not stamped. Every stamped task must be able to finish without the calling thread
// (true of queued work: a wait for an event waits for a record already queued).
inline void remove_task_observer_when_stamped_reported() {
  std::unique_lock<std::mutex> lock(detail::task_observer_mu);
  detail::task_observer_set.store(false, std::memory_order_relaxed);
  detail::all_stamped_reported.wait(lock, [] { return detail::stamped_not_reported == 0; });
  detail::task_observer = nullptr;
}

// Whether tasks queued now are stamped.
inline bool observing_tasks() {
  return detail::task_observer_set.load(std::memory_order_relaxed);
}

// Called as a task is queued: whether to stamp it and report it after it ran.
inline bool stamp_task() {
  if (!observing_tasks()) return false;
  std::lock_guard<std::mutex> lock(detail::task_observer_mu);
  if (!detail::task_observer_set.load(std::memory_order_relaxed)) return false;
  ++detail::stamped_not_reported;
  return true;
}

// Called by an executor after a stamped task ran; dropped when the observer is gone.
inline void report_task(const TaskRun& run) {
  std::lock_guard<std::mutex> lock(detail::task_observer_mu);
  if (detail::task_observer) detail::task_observer(run);
  if (--detail::stamped_not_reported == 0) detail::all_stamped_reported.notify_all();
}

}  // namespace st::emu
