// Build it yourself, step 3: overlap (tutorial page 4). The countdown of page 3 in
// grad_ready, and one communication thread that exchanges the launched buckets in order
// while the caller (backward) continues. Only that thread calls MPI during backward
// (MPI_THREAD_SERIALIZED is enough).
#include "diy.h"

namespace diy {

OverlapExchanger::OverlapExchanger(Grads& grads, std::vector<Bucket> plan, MPI_Comm comm)
    : grads_(grads), plan_(std::move(plan)), comm_(comm), bucket_of_(grads.size(), -1) {
  for (size_t b = 0; b < plan_.size(); ++b) {
    pending_.push_back(static_cast<int>(plan_[b].params.size()));
    for (int p : plan_[b].params) bucket_of_[p] = static_cast<int>(b);
  }
  worker_ = std::thread([this] { run(); });
}

OverlapExchanger::~OverlapExchanger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void OverlapExchanger::grad_ready(int param) {
  const int b = bucket_of_[param];
  if (--pending_[b] > 0) return;
  // Launch strictly in bucket order: a complete bucket waits for the ones before it.
  std::lock_guard<std::mutex> lock(mu_);
  while (next_launch_ < static_cast<int>(plan_.size()) && pending_[next_launch_] == 0)
    queue_.push_back(next_launch_++);
  cv_.notify_all();
}

void OverlapExchanger::run() {
  for (;;) {
    int b;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      b = queue_.front();
      queue_.pop_front();
    }
    exchange_bucket(grads_, plan_[b], comm_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++done_;
    }
    cv_.notify_all();
  }
}

void OverlapExchanger::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_ == static_cast<int>(plan_.size()); });
}

}  // namespace diy
