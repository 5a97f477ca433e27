// Which share of the gradient forward overlap holds back for the next forward
// (--first-layers-first -1). Buckets exchanged in ready order overlap backward; the
// held-back ones (the first layers', sent first layer first once backward has ended)
// overlap the next forward, which needs them first (P3, MLSys'19). Held back too much,
// the link idles during backward; too little, the forward waits for the first layers'
// buckets queued behind the rest. The link stays busy through backward while the
// buckets sent during it take at least the part of backward after the first bucket is
// ready: at most 1 - that / exchange can be held back, and that much is (an exchange
// shorter than it: nothing).
// Measured over a few steps in ready order, summed over the ranks, so every rank
// chooses the same share before the same step.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/reducer.h"

namespace st {

class ExchangeOrderProbe {
 public:
  // The share for a backward of `backward_ms` against exchanges of `exchange_ms` in all.
  static double share(double backward_ms, double exchange_ms);

  // After step `done` (steps of this run) has finished, with its buckets' stamps
  // complete and nothing in flight: adds that step's times (`backward_ms`: its backward
  // phase, which began at the stamps' origin), and at the last probed step
  // agrees on the share with the other ranks (collective) and sets it on `reducer`.
  // Returns true when it set the share.
  bool after_step(int64_t done, double backward_ms, const std::vector<BucketTimes>& buckets,
                  Communicator& comm, Reducer& reducer);
  // Summed over the probed steps and the ranks: backward after the first ready bucket.
  double backward_ms() const { return backward_ms_; }
  double exchange_ms() const { return exchange_ms_; }

 private:
  // The first step warms up caches and threads; the next ones are measured.
  static constexpr int64_t kFirst = 2, kLast = 5;
  double backward_ms_ = 0, exchange_ms_ = 0;
};

}  // namespace st
