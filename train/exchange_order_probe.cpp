#include "train/exchange_order_probe.h"

#include <algorithm>

namespace st {

double ExchangeOrderProbe::share(double backward_ms, double exchange_ms) {
  if (exchange_ms <= 0) return 0;
  return std::clamp(1.0 - backward_ms / exchange_ms, 0.0, 1.0);
}

bool ExchangeOrderProbe::after_step(int64_t done, double backward_ms,
                                    const std::vector<BucketTimes>& buckets, Communicator& comm,
                                    Reducer& reducer) {
  if (done < kFirst || done > kLast) return false;
  // The link can work only from the first bucket's ready mark (after the last layers'
  // backward) to backward's end.
  double first_ready = backward_ms;
  for (const BucketTimes& t : buckets) {
    if (t.ready_ms >= 0) first_ready = std::min(first_ready, t.ready_ms);
    if (t.exchange_end_ms >= 0) exchange_ms_ += t.exchange_end_ms - t.exchange_begin_ms;
  }
  backward_ms_ += backward_ms - first_ready;
  if (done < kLast) return false;
  backward_ms_ = comm.allreduce_scalar(backward_ms_);
  exchange_ms_ = comm.allreduce_scalar(exchange_ms_);
  reducer.set_first_layers_first(share(backward_ms_, exchange_ms_));
  return true;
}

}  // namespace st
