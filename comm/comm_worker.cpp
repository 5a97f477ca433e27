#include "comm/comm_worker.h"

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
  std::packaged_task<void()> task(std::move(fn));
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

void CommWorker::loop() {
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
