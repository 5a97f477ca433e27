#include "tests/sparsify/deferring_ops.h"

namespace st::test {

void DeferringOps::defer(std::function<void()> pass) {
  queue_.push_back(std::move(pass));
  ++deferred_;
}

void DeferringOps::flush() {
  // Queued passes reach memory themselves: take the queue first so they do not recurse.
  std::vector<std::function<void()>> now;
  now.swap(queue_);
  for (auto& pass : now) pass();
}

void* DeferringOps::memory(const Buffer& b) {
  flush();
  return CpuOps::memory(b);
}

void DeferringOps::fill(Buffer& b, part::Range r, float v) {
  defer([this, b, r, v]() mutable { CpuOps::fill(b, r, v); });
}

void DeferringOps::scale(Buffer& y, part::Range r, float a) {
  defer([this, y, r, a]() mutable { CpuOps::scale(y, r, a); });
}

void DeferringOps::axpy(float a, const Buffer& x, part::Range r, Buffer& y) {
  defer([this, a, x, r, y]() mutable { CpuOps::axpy(a, x, r, y); });
}

void DeferringOps::allreduce_sum(Communicator& comm, Buffer& b) {
  flush();
  CpuOps::allreduce_sum(comm, b);
}

void DeferringOps::allgatherv(Communicator& comm, const Buffer& in,
                              const std::vector<int64_t>& counts, Buffer& out) {
  flush();
  CpuOps::allgatherv(comm, in, counts, out);
}

void DeferringOps::broadcast(Communicator& comm, Buffer& b, int root) {
  flush();
  CpuOps::broadcast(comm, b, root);
}

void DeferringOps::allgather(Communicator& comm, const Buffer& in, Buffer& out) {
  flush();
  CpuOps::allgather(comm, in, out);
}

}  // namespace st::test
