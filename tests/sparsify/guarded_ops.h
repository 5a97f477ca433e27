// A checking bulk::Ops for tests: a decorator generated from the operation list
// (sparsify/bulk/decorator.h) around CpuOps, except that between calls every buffer's
// memory holds poison (quiet NaNs in float buffers, large negative numbers in index
// buffers) while a private shadow keeps the true contents. Each call writes the shadows
// of the buffers it touches (the list names them) back into their memory, runs CpuOps,
// saves the memory into the shadows and poisons it again. A wrapped bucket tensor is
// poisoned the same way until release() writes its true contents back.
//
// So code that goes through bulk::Ops gets exactly the plain CPU results, and code that
// reads a buffer's or a wrapped tensor's memory behind the interface reads poison (a
// different result, or a crash on a poisoned index), while its direct writes are undone
// at the next call. The guard tests compare a run on GuardedOps with one on CpuOps bit
// for bit. The CPU implementation behind the guard refuses any access to buffer memory
// outside a guarded call (unguarded()), so nothing reaches it around the guard.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/decorator.h"

namespace st::test {

// CpuOps that reaches buffer memory only while the guard runs one of its calls.
class CheckedCpuOps : public bulk::CpuOps {
 public:
  bool in_call = false;

 protected:
  void* memory(const bulk::Buffer& b) override;
};

struct CheckedTarget {
  CheckedCpuOps cpu;
};

class GuardedOps : private CheckedTarget, public bulk::Decorator {
 public:
  using Buffer = bulk::Buffer;

  GuardedOps() : Decorator(cpu) {}
  const char* name() const override { return "guarded-cpu"; }

  // Calls that restored and re-poisoned memory so far (the tests check the guard ran).
  int64_t guarded_calls() const { return calls_; }
  // The CPU implementation behind the guard: a call made on it directly bypasses the
  // guard and throws when it reaches buffer memory.
  bulk::CpuOps& unguarded() { return cpu; }

 protected:
  void around(Call& call, bulk::FunctionRef run) override;

 private:
  // One allocation: its tensor (kept alive, so its address is never reused) and the
  // true contents of its bytes.
  struct Alloc {
    Tensor base;
    std::vector<uint8_t> shadow;
  };

  // The allocation holding b's memory, registered on first sight (null: no memory).
  Alloc* find(const Buffer& b);
  // Adds the allocations of the call's buffers (and its result) to `touched`.
  void collect(const Call& call, std::vector<Alloc*>& touched);
  static void poison(Tensor& t);

  std::map<uintptr_t, Alloc> allocs_;  // by base address
  int64_t calls_ = 0;
};

}  // namespace st::test
