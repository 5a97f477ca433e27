// A bulk::Ops for tests that keeps a device stream's timing on the CPU: a decorator
// generated from the operation list (sparsify/bulk/decorator.h) around CpuOps that queues
// every call of mode Later or Sized (fill, scale, axpy, copies, scatters, packing, ...)
// instead of running it; the queue runs, in order, before any other call (one that
// returns a host value, a collective, a size change) and at finish(). Work therefore
// happens in call order, as on a stream, but a wrapped tensor read by anyone else before
// finish() shows what a GPU would show without the fence: its state before the queued
// passes. Comparing a run on it with a plain CpuOps run finds every missing
// Ops::finish() on the paths the run takes.
#pragma once

#include <functional>
#include <vector>

#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/decorator.h"

namespace st::test {

// The CPU implementation a test decorator wraps, constructed before the decorator.
struct CpuTarget {
  bulk::CpuOps cpu;
};

class DeferringOps : private CpuTarget, public bulk::Decorator {
 public:
  DeferringOps() : Decorator(cpu) {}
  const char* name() const override { return "deferring-cpu"; }

  // Passes queued so far (a run that queued none tested nothing).
  int64_t deferred() const { return deferred_; }

 protected:
  void around(Call& call, bulk::FunctionRef run) override;
  bool queues() const override { return true; }
  void later(const bulk::OpInfo& op, std::function<void()> task) override;

 private:
  void flush();
  std::vector<std::function<void()>> queue_;
  int64_t deferred_ = 0;
};

}  // namespace st::test
