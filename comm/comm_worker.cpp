#include "comm/comm_worker.h"

#ifdef __linux__
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#endif

#include "core/device.h"

namespace st {

CommWorker::CommWorker() : thread_([this] { loop(); }) {}

CommWorker::~CommWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Work CommWorker::submit(std::function<void()> fn) {
  // The process's device may be chosen after this thread started: each task binds it
  // first (free once done); without it the thread's CUDA calls would use GPU 0.
  std::packaged_task<void()> task([fn = std::move(fn)] {
    bind_thread_to_process_device();
    fn();
  });
  Work w(task.get_future().share());
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return w;
}

void CommWorker::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

namespace {

// Asks the scheduler for a short time slice (Linux 6.12+, EEVDF's sched_runtime for normal
// threads; no privilege needed, the nice value is kept). The CPU share stays the same; a
// short slice gives an earlier deadline, so the thread preempts compute soon after its
// back-off sleep ends instead of waiting out a busy core's slice. Older kernels ignore it.
void request_short_slice() {
#ifdef __linux__
  struct {  // struct sched_attr (linux/sched/types.h, which clashes with <sched.h>)
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
  } attr{};
  attr.size = sizeof attr;
  attr.sched_policy = 0;                             // SCHED_OTHER
  if (sched_getscheduler(0) != SCHED_OTHER) return;  // batch, idle or real-time: leave it
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, 0);  // this thread's
  if (errno != 0) return;
  attr.sched_nice = nice;
  attr.sched_runtime = 100 * 1000;           // ns: the smallest slice the kernel accepts
  syscall(SYS_sched_setattr, 0, &attr, 0U);  // best effort: a refusal changes nothing
#endif
}

}  // namespace

void CommWorker::loop() {
  request_short_slice();
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    task();  // exceptions land in the task's future
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
    idle_cv_.notify_all();
  }
}

}  // namespace st
