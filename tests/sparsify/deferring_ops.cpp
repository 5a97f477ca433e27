#include "tests/sparsify/deferring_ops.h"

namespace st::test {

void DeferringOps::later(const bulk::OpInfo&, std::function<void()> task) {
  queue_.push_back(std::move(task));
  ++deferred_;
}

void DeferringOps::flush() {
  std::vector<std::function<void()>> now;
  now.swap(queue_);
  for (auto& pass : now) pass();
}

// Every call that is not queued sees the queued ones done first, as on a stream.
void DeferringOps::around(Call&, bulk::FunctionRef run) {
  flush();
  run();
}

}  // namespace st::test
