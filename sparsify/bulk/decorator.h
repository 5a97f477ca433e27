// A bulk::Ops around another implementation (the target), every operation generated from
// the one list (op_list.h). A decorator says what it adds in three places, never per call:
//   around(call, run)  every call that runs now: `run` makes the target's call; the
//                      decorator sees the operation, its mode and the buffers it touches
//   queues()           whether calls of mode Later and Sized are queued instead of run;
//   later(op, task)    then they are sized on the host and `task` (holding copies of the
//                      arguments) is handed over, to run in call order
// The decorators: EmuOps (the emulated device's queue), TimingOps (phase timing), and the
// test decorators GuardedOps and DeferringOps (tests/sparsify/). A decorator provides a
// family exactly when its target does.
#pragma once

#include <functional>
#include <span>

#include "sparsify/bulk/bulk_ops.h"

namespace st::bulk {

// A non-owning reference to a callable taking nothing and returning nothing.
class FunctionRef {
 public:
  template <class F>
  FunctionRef(F& f)  // NOLINT(google-explicit-constructor): a view, like std::span
      : obj_(&f), call_([](void* o) { (*static_cast<F*>(o))(); }) {}
  void operator()() const { call_(obj_); }

 private:
  void* obj_;
  void (*call_)(void*);
};

class Decorator : ST_BULK_FAMILIES(ST_BULK_PUBLIC_BASE) public Ops {
 public:
  Device device() const override { return target_->device(); }
  const char* name() const override { return target_->name(); }
#define ST_BULK_DECORATED_FAMILY(Class, accessor, ...)      \
  Class* accessor() override {                              \
    return target_->accessor() != nullptr ? this : nullptr; \
  }
  ST_BULK_FAMILIES(ST_BULK_DECORATED_FAMILY)
#undef ST_BULK_DECORATED_FAMILY
  ST_BULK_ALL_OPS(ST_BULK_DECLARE_OVERRIDE)

 protected:
  // `target` must outlive the decorator (owners keep both).
  explicit Decorator(Ops& target) : target_(&target) {}

  // One call as around() sees it.
  struct Call {
    OpInfo op;
    std::span<const Buffer* const> buffers;  // what the call reads or writes (entries may be null)
    const Buffer* result = nullptr;          // wrap / slice: the returned buffer, after run()
  };
  // Runs a call: the default runs it.
  virtual void around(Call& call, FunctionRef run);
  virtual bool queues() const {
    return false;
  }
  // A queued call (only when queues()); the default runs it at once.
  virtual void later(const OpInfo& op, std::function<void()> task);
  // Sizes an output on the host before a Sized call is queued.
  void sized(Buffer& b, Elem e, int64_t n) {
    target_->resize(b, e, n < 0 ? 0 : n);
  }
  Ops& target() {
    return *target_;
  }

 private:
  template <class R, class Fn>
  R run_call(Call& call, Fn&& fn);

  Ops* target_;
};

}  // namespace st::bulk
