// Streams and events of the emulated accelerator, with CUDA's meaning.
//
// A Stream is a queue with its own executor thread: enqueue() returns at once and the
// executor runs the tasks in order, marked as executing for the stream's device (so they
// may touch its memory). Two streams are ordered only by events: Event::record(s) marks
// the position of everything queued on s so far; Stream::wait(e) makes work queued on the
// stream afterwards wait until that position has run (cudaStreamWaitEvent; an event never
// recorded is complete). With a task delay (runtime.h) every executor sleeps before each
// task, so a missing wait shows up as stale data.
//
// Each task carries what it is ordered after (ordering.h): the tasks before it on its
// stream, what the thread that queued it was ordered after, and the events the stream
// waited for.
//
// A task that throws leaves its error on the stream (as a CUDA error stays with its
// context): the next synchronize() rethrows it; later tasks still run so events complete.
//
// Each host thread has, per device, its own default stream, current unless a StreamGuard
// says otherwise (core/cuda/stream.h's Context); using it from a thread that works on
// another device is an error.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/emu/ordering.h"

namespace st::emu {

class Event;

class Stream {
 public:
  // `kind` ("default", "copy", or none) is what a task observer reports it as
  // (task_observer.h); a string literal.
  explicit Stream(int device, const char* kind = "");
  // Runs what is queued, then joins the executor.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const;
  // `slow`: the task delay applies (kernels); copies and event marks pass it by, as a
  // copy engine and the stream's own bookkeeping do, so the delay widens the window in
  // which a kernel's result is still missing. `what` names the task for a task observer
  // (task_observer.h; default "kernel" if slow, else "copy"); it must live until the task
  // has run.
  void enqueue(std::function<void()> task, bool slow = true, const char* what = nullptr);
  // Returns when everything queued so far has run; rethrows a task's error.
  void synchronize();
  bool ready() const;
  // Work queued on this stream after the call waits until `e`'s latest record has run.
  void wait(const Event& e);
  // The stream's creation number, and how many tasks were queued on it so far (the last
  // one's position): what an ordering clock (ordering.h) counts.
  int number() const;
  uint64_t tasks_queued() const;

 private:
  friend class Event;
  // enqueue(), also after `extra`; returns what a thread that saw the task run is ordered
  // after.
  OrderingClock enqueue_after(std::function<void()> task, bool slow, const char* what,
                              const OrderingClock* extra);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Event {
 public:
  Event();
  // Marks the position of everything queued on `s` so far. `what` names the mark for a
  // task observer (a string literal).
  void record(Stream& s, const char* what = "record event");
  // Blocks the host until the latest record has run.
  void synchronize() const;
  bool ready() const;

 private:
  friend class Stream;
  struct State;
  std::shared_ptr<State> state_;
};

// The calling thread's current stream on `device` (its own default stream, created on
// first use, unless a StreamGuard replaced it).
Stream& current_stream(int device);
// The stream whose executor is the calling thread (nullptr on a host thread).
Stream* executing_stream();
// The stream new device memory of `device` is keyed by (core/emu/memory.h): the
// executing stream inside one of its tasks, else the calling thread's current stream.
Stream& allocation_stream(int device);

// Runs `fn` in stream order on `device` and waits for it (cudaLaunchKernel or
// cudaMemcpyAsync, then cudaStreamSynchronize): queued on the calling thread's current
// stream, whose errors, this task's included, are rethrown; in place on an executor of
// `device`, where work already runs in stream order. `what` names the work when the
// calling thread works on another device; `slow`: a kernel, which the task delay applies to.
void run_in_stream_order(int device, const char* what, const std::function<void()>& fn, bool slow);

// Makes `s` the calling thread's current stream on its device for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  Stream* prev_;
};

}  // namespace st::emu
