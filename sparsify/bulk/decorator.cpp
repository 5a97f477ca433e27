#include "sparsify/bulk/decorator.h"

#include <optional>
#include <type_traits>

#include "core/error.h"

namespace st::bulk {

namespace {

// The interface of `ops` that declares an operation of `Family`.
template <class Family>
Family& family_of(Ops& ops) {
  if constexpr (std::is_same_v<Family, Ops>) {
    return ops;
  } else {
    return *FamilyOf<Family>::of(ops);
  }
}

}  // namespace

void Decorator::around(Call&, FunctionRef run) {
  run();
}

void Decorator::later(const OpInfo&, std::function<void()> task) {
  task();
}

template <class R, class Fn>
R Decorator::run_call(Call& call, Fn&& fn) {
  if constexpr (std::is_void_v<R>) {
    around(call, fn);
  } else {
    std::optional<R> r;
    auto body = [&] {
      r.emplace(fn());
      if constexpr (std::is_same_v<R, Buffer>) call.result = &*r;
    };
    around(call, body);
    ST_CHECK(r.has_value(), "bulk::Decorator (", name(), "): ", call.op.name,
             " returned without running");
    return std::move(*r);
  }
}

// Calls of mode Later and Sized go to later() when the decorator queues: sized on the
// host first, the task holding copies of the arguments (buffer handles, ranges, pieces).
#define ST_BULK_QUEUE_Later(Family, Mode, name, args, sizing)                 \
  if (queues()) {                                                             \
    ST_BULK_EXPAND sizing;                                                    \
    later({#name, OpMode::Mode},                                              \
          [=, t = &family_of<Family>(*target_)]() mutable { t->name args; }); \
    return;                                                                   \
  }
#define ST_BULK_QUEUE_Sized ST_BULK_QUEUE_Later
#define ST_BULK_QUEUE_Handle(...)
#define ST_BULK_QUEUE_Release(...)
#define ST_BULK_QUEUE_Wait(...)
#define ST_BULK_QUEUE_Fence(...)
#define ST_BULK_QUEUE_Comm(...)

#define ST_BULK_DECORATE(Family, Mode, ret, name, params, args, bufs, sizing)                   \
  ret Decorator::name params {                                                                  \
    ST_BULK_QUEUE_##Mode(Family, Mode, name, args, sizing)                                      \
        const Buffer* const watched[] = {nullptr, ST_BULK_EXPAND bufs};                         \
    Call call{{#name, OpMode::Mode}, watched};                                                  \
    return run_call<ret>(call, [&]() -> ret { return family_of<Family>(*target_).name args; }); \
  }
ST_BULK_ALL_OPS(ST_BULK_DECORATE)
#undef ST_BULK_DECORATE

}  // namespace st::bulk
