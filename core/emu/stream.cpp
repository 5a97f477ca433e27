#include "core/emu/stream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "core/emu/context.h"
#include "core/emu/ordering.h"
#include "core/emu/runtime.h"
#include "core/emu/task_observer.h"
#include "core/error.h"
#include "core/parallel.h"

namespace st::emu {

struct Event::State {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, done = 0;
  OrderingClock clock;  // what the latest record is ordered after, itself included
};

namespace {

// Streams are numbered in creation order, for the task observer.
std::atomic<int> streams_made{0};
thread_local Stream* t_executing_stream = nullptr;

}  // namespace

struct Stream::Impl {
  Stream* self = nullptr;
  int device = 0;
  int number = 0;
  const char* kind = "";
  mutable std::mutex mu;
  std::condition_variable cv, idle;
  struct Task {
    std::function<void()> fn;
    bool slow = true;
    TaskRun run;  // its stamps when an observer was set as it was queued
    bool observed = false;
    OrderingClock clock;
  };
  std::deque<Task> queue;
  uint64_t queued = 0, completed = 0;
  // The union of every queued task's clock: what the stream's work is ordered after.
  OrderingClock ordered_after;
  std::exception_ptr error;
  bool stop = false;
  std::thread thread;

  void loop() {
    set_executing_device(device);
    t_executing_stream = self;
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        task = std::move(queue.front());
        queue.pop_front();
      }
      adopt_process_threads();
      std::exception_ptr failed = run(task);
      std::lock_guard<std::mutex> lock(mu);
      if (failed && !error) error = failed;
      ++completed;
      idle.notify_all();
    }
  }

  // Queues `t` after everything queued so far, ordered after what the calling thread
  // is ordered after and after `extra`.
  // Returns what a thread that saw `t` run is ordered after.
  OrderingClock push(Task t, const OrderingClock* extra) {
    t.clock = thread_clock();
    if (extra) t.clock.merge(*extra);
    OrderingClock through;
    {
      std::lock_guard<std::mutex> lock(mu);
      t.clock.merge(ordered_after);
      t.clock.after[number] = queued;
      ordered_after = t.clock;
      through = t.clock;
      through.after[number] = ++queued;
      queue.push_back(std::move(t));
    }
    cv.notify_one();
    return through;
  }

  // What a thread that saw the first `tasks` tasks run is ordered after.
  OrderingClock clock_through(uint64_t tasks) const {
    std::lock_guard<std::mutex> lock(mu);
    OrderingClock c = ordered_after;
    c.after[number] = std::max(c.after[number], tasks);
    return c;
  }

  // Runs one task after the delay and reports it if it was stamped; returns its error.
  static std::exception_ptr run(Task& task) {
    TaskClockScope clock(task.clock);
    if (task.observed) task.run.begin = TaskRun::Clock::now();
    if (const int us = task_delay_us(); us > 0 && task.slow)
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    std::exception_ptr failed;
    try {
      task.fn();
    } catch (...) {
      failed = std::current_exception();
    }
    task.fn = nullptr;  // what it captured is released in stream order
    if (task.observed) {
      task.run.end = TaskRun::Clock::now();
      report_task(task.run);
    }
    return failed;
  }
};

Stream::Stream(int device, const char* kind) : impl_(std::make_unique<Impl>()) {
  read_environment();  // here, not first on the executor thread
  ST_CHECK(device >= 0 && device < device_count(), "emu: no device emu:", device);
  open_context(device);
  impl_->self = this;
  impl_->device = device;
  impl_->number = streams_made.fetch_add(1, std::memory_order_relaxed);
  impl_->kind = kind;
  impl_->thread = std::thread([impl = impl_.get()] { impl->loop(); });
}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

int Stream::device() const {
  return impl_->device;
}

void Stream::enqueue(std::function<void()> task, bool slow, const char* what) {
  enqueue_after(std::move(task), slow, what, nullptr);
}

OrderingClock Stream::enqueue_after(std::function<void()> task, bool slow, const char* what,
                                    const OrderingClock* extra) {
  Impl::Task t{std::move(task), slow, {}, stamp_task(), {}};
  if (t.observed) {
    t.run.stream = impl_->number;
    t.run.stream_kind = impl_->kind;
    t.run.what = what ? what : slow ? "kernel" : "copy";
    t.run.queued_by = std::this_thread::get_id();
    t.run.queued = TaskRun::Clock::now();
  }
  return impl_->push(std::move(t), extra);
}

void Stream::synchronize() {
  std::exception_ptr error;
  uint64_t target = 0;
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    target = impl_->queued;
    impl_->idle.wait(lock, [&] { return impl_->completed >= target; });
    std::swap(error, impl_->error);
  }
  thread_clock().merge(impl_->clock_through(target));
  if (error) std::rethrow_exception(error);
  rethrow_sticky_error();
}

bool Stream::ready() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->completed == impl_->queued;
}

int Stream::number() const {
  return impl_->number;
}

uint64_t Stream::tasks_queued() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->queued;
}

void Stream::wait(const Event& e) {
  std::shared_ptr<Event::State> st = e.state_;
  uint64_t target = 0;
  OrderingClock recorded;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    target = st->recorded;
    recorded = st->clock;
  }
  enqueue_after(
      [st, target] {
        std::unique_lock<std::mutex> lock(st->mu);
        st->cv.wait(lock, [&] { return st->done >= target; });
      },
      false, "wait for event", &recorded);
}

Event::Event() : state_(std::make_shared<State>()) {}

void Event::record(Stream& s, const char* what) {
  std::shared_ptr<State> st = state_;
  // Held across the enqueue, so the mark's number and its clock belong together.
  std::lock_guard<std::mutex> lock(st->mu);
  const uint64_t target = ++st->recorded;
  st->clock = s.enqueue_after(
      [st, target] {
        std::lock_guard<std::mutex> lock(st->mu);
        st->done = std::max(st->done, target);
        st->cv.notify_all();
      },
      false, what, nullptr);
}

void Event::synchronize() const {
  OrderingClock seen;
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    const uint64_t target = state_->recorded;
    state_->cv.wait(lock, [&] { return state_->done >= target; });
    seen = state_->clock;
  }
  thread_clock().merge(seen);
}

bool Event::ready() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done >= state_->recorded;
}

namespace {

// One thread's streams: per device, its own default stream and the current one.
struct ThreadStreams {
  std::map<int, std::unique_ptr<Stream>> own;
  std::map<int, Stream*> current;
};

ThreadStreams& thread_streams() {
  thread_local ThreadStreams t;
  return t;
}

}  // namespace

namespace {

// The calling thread's current stream on `device`, whichever device it works on.
Stream& thread_stream(int device) {
  ThreadStreams& t = thread_streams();
  if (auto it = t.current.find(device); it != t.current.end() && it->second) return *it->second;
  std::unique_ptr<Stream>& s = t.own[device];
  if (!s) s = std::make_unique<Stream>(device, "default");
  return *s;
}

}  // namespace

Stream& current_stream(int device) {
  check_thread_on(device, "a stream");
  return thread_stream(device);
}

Stream* executing_stream() {
  return t_executing_stream;
}

Stream& allocation_stream(int device) {
  if (t_executing_stream != nullptr && t_executing_stream->device() == device)
    return *t_executing_stream;
  // As CUDA's allocator takes the thread's stream on the device it allocates on (under a
  // device guard), whichever device the thread works on.
  return thread_stream(device);
}

void run_in_stream_order(int device, const char* what, const std::function<void()>& fn, bool slow) {
  if (executing_device() == device) {
    fn();
    return;
  }
  check_thread_on(device, what);
  Stream& s = current_stream(device);
  s.enqueue(fn, slow, what);
  s.synchronize();
}

StreamGuard::StreamGuard(Stream& s) : device_(s.device()) {
  check_thread_on(device_, "a stream guard");
  Stream*& cur = thread_streams().current[device_];
  prev_ = cur;
  cur = &s;
}

StreamGuard::~StreamGuard() {
  thread_streams().current[device_] = prev_;
}

}  // namespace st::emu
