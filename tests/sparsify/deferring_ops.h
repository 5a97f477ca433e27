// A bulk::Ops for tests that keeps a device stream's timing on the CPU: the element-wise
// passes that return nothing (fill, scale, axpy) are queued instead of run, and the queue
// runs, in order, when a later call reaches buffer memory or a collective, or at
// finish(). Work therefore happens in call order, as on a stream, but a wrapped tensor
// read by anyone else before finish() shows what a GPU would show without the fence: its
// state before the queued passes. Comparing a run on it with a plain CpuOps run finds
// every missing Ops::finish() on the paths the run takes.
#pragma once

#include <functional>
#include <vector>

#include "sparsify/bulk/cpu_ops.h"

namespace st::test {

class DeferringOps : public bulk::CpuOps {
 public:
  using Buffer = bulk::Buffer;

  const char* name() const override { return "deferring-cpu"; }
  void fill(Buffer& b, part::Range r, float v) override;
  void scale(Buffer& y, part::Range r, float a) override;
  void axpy(float a, const Buffer& x, part::Range r, Buffer& y) override;
  void finish() override { flush(); }

  void allreduce_sum(Communicator& comm, Buffer& b) override;
  void allgatherv(Communicator& comm, const Buffer& in, const std::vector<int64_t>& counts,
                  Buffer& out) override;
  void broadcast(Communicator& comm, Buffer& b, int root) override;
  void allgather(Communicator& comm, const Buffer& in, Buffer& out) override;

  // Passes queued so far (a run that queued none tested nothing).
  int64_t deferred() const { return deferred_; }

 protected:
  void* memory(const Buffer& b) override;

 private:
  void defer(std::function<void()> pass);
  void flush();
  std::vector<std::function<void()>> queue_;
  int64_t deferred_ = 0;
};

}  // namespace st::test
