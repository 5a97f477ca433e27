#include "train/forward_overlap.h"

#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/stream_sync.h"

namespace st {

std::string forward_overlap_blocker(const TrainConfig& c, bool clips_before_exchange,
                                    bool scales_loss) {
  if (!c.forward_overlap) return "";  // not asked for: nothing to announce
  if (!c.overlap) return "--no-overlap exchanges every bucket after backward";
  if (c.clip > 0 && !clips_before_exchange)
    return "--clip scales by the norm of the whole averaged gradient";
  if (!c.trace.empty())
    return "--trace gathers its timelines with collectives that would run beside the exchange";
  if (scales_loss)
    return "--precision fp16 skips an overflowed step only once every bucket is checked";
  return "";
}

Reducer::BucketUpdate bucket_update(Optimizer& optimizer) {
  // The optimiser's positions of each parameter, found once.
  auto position = std::make_shared<std::map<const Param*, size_t>>();
  for (size_t i = 0; i < optimizer.params().size(); ++i) (*position)[optimizer.params()[i]] = i;
  return [&optimizer, position](const Bucket& bucket) -> std::function<void()> {
    std::vector<size_t> which;
    for (const Param* p : bucket.params) {
      auto it = position->find(p);
      ST_CHECK(it != position->end(), "forward overlap: parameter ", p->name,
               " is not the optimiser's");
      which.push_back(it->second);
    }
    const float lr = optimizer.lr();
    const Device device = bucket.params.front()->value.device();
    return [&optimizer, which = std::move(which), lr, device] {
      optimizer.step_params(which, lr);
      // The next forward reads these values on the compute stream once this task is done.
      synchronize_current_stream(device);
    };
  };
}

UpdateTiming::UpdateTiming(const TrainConfig& c, bool clips_before_exchange, bool scales_loss,
                           Reducer& reducer, Optimizer& optimizer, Communicator& comm, bool quiet)
    : reducer_(reducer), comm_(comm), quiet_(quiet) {
  const std::string blocker = forward_overlap_blocker(c, clips_before_exchange, scales_loss);
  per_bucket_ = c.forward_overlap && blocker.empty();
  if (!blocker.empty() && !quiet_)
    std::fprintf(stderr, "--forward-overlap ignored: %s\n", blocker.c_str());
  if (!per_bucket_) return;
  reducer_.set_bucket_update(bucket_update(optimizer));
  if (c.first_layers_first >= 0)
    reducer_.set_first_layers_first(c.first_layers_first);
  else
    order_probe_ = std::make_unique<ExchangeOrderProbe>();
}

UpdateTiming::~UpdateTiming() {
  if (!per_bucket_) return;
  try {
    reducer_.drain();
  } catch (...) {
  }
}

void UpdateTiming::begin_step(const std::function<void()>& zero_grads) const {
  if (!per_bucket_) zero_grads();
}

void UpdateTiming::after_forward(int k, StepObservers& observers, int64_t steps_done,
                                 const std::function<void()>& then) {
  if (k != 0 || !per_bucket_) return;
  observers.timed(Phase::Exchange, [&] { reducer_.drain(); });
  then();
  if (order_probe_) probe_exchange_order(steps_done);
}

void UpdateTiming::end_step(const std::function<void()>& update, double backward_ms) {
  last_backward_ms_ = backward_ms;
  if (!per_bucket_) update();
}

void UpdateTiming::probe_exchange_order(int64_t steps_done) {
  comm_.wait_idle();  // its agreement is a collective on this thread
  if (!order_probe_->after_step(steps_done, last_backward_ms_, reducer_.bucket_times(), comm_,
                                reducer_))
    return;
  if (!quiet_)
    std::fprintf(
        stderr,
        "forward overlap: backward after the first bucket %.1f ms, exchange %.1f ms over "
        "the ranks' probed steps; the first layers' %.2f of the gradient go after backward\n",
        order_probe_->backward_ms(), order_probe_->exchange_ms(),
        reducer_.options().first_layers_first);
  order_probe_.reset();
  if (!reducer_.holds_back()) keep_step_end_update();
}

// Nothing held back means backward covers the exchange: the next forward would wait for
// the first layers' buckets, sent last, and so gain nothing, while the per-layer waits
// and the updates on the communication thread still cost (measured slower at batch 64
// and 128 in docs/RESULTS.md). Called between the forward and the backward of a step,
// with nothing in flight and after the gradients were zeroed: this step's update then
// runs at its end.
void UpdateTiming::keep_step_end_update() {
  reducer_.set_bucket_update(nullptr);
  per_bucket_ = false;
  if (!quiet_)
    std::fprintf(stderr,
                 "forward overlap off: that share holds back no bucket (backward covers the "
                 "exchange), so buckets overlap backward only and each step ends with the "
                 "update\n");
}

}  // namespace st
