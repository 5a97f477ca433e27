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
#include "core/emu/runtime.h"
#include "core/emu/task_observer.h"
#include "core/error.h"
#include "core/parallel.h"

namespace st::emu {

struct Event::State {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, done = 0;
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
  };
  std::deque<Task> queue;
  uint64_t queued = 0, completed = 0;
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

  // Runs one task after the delay and reports it if it was stamped; returns its error.
  static std::exception_ptr run(Task& task) {
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
  Impl::Task t{std::move(task), slow, {}, observing_tasks()};
  if (t.observed) {
    t.run.stream = impl_->number;
    t.run.stream_kind = impl_->kind;
    t.run.what = what ? what : slow ? "kernel" : "copy";
    t.run.queued_by = std::this_thread::get_id();
    t.run.queued = TaskRun::Clock::now();
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->queue.push_back(std::move(t));
    ++impl_->queued;
  }
  impl_->cv.notify_one();
}

void Stream::synchronize() {
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    const uint64_t target = impl_->queued;
    impl_->idle.wait(lock, [&] { return impl_->completed >= target; });
    std::swap(error, impl_->error);
  }
  if (error) std::rethrow_exception(error);
  rethrow_sticky_error();
}

bool Stream::ready() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->completed == impl_->queued;
}

void Stream::wait(const Event& e) {
  std::shared_ptr<Event::State> st = e.state_;
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    target = st->recorded;
  }
  enqueue(
      [st, target] {
        std::unique_lock<std::mutex> lock(st->mu);
        st->cv.wait(lock, [&] { return st->done >= target; });
      },
      false, "wait for event");
}

Event::Event() : state_(std::make_shared<State>()) {}

void Event::record(Stream& s, const char* what) {
  std::shared_ptr<State> st = state_;
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    target = ++st->recorded;
  }
  s.enqueue(
      [st, target] {
        std::lock_guard<std::mutex> lock(st->mu);
        st->done = std::max(st->done, target);
        st->cv.notify_all();
      },
      false, what);
}

void Event::synchronize() const {
  std::unique_lock<std::mutex> lock(state_->mu);
  const uint64_t target = state_->recorded;
  state_->cv.wait(lock, [&] { return state_->done >= target; });
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
