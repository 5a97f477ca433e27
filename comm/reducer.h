// Reducer: the bucketed gradient pipeline (PyTorch DDP's design, Li et al. VLDB 2020).
// A fixed plan cuts the flat gradient buffer, which FlatParams lays out in reverse
// parameter order, into contiguous buckets: a small first one, then `bucket_cap_mb`.
// During backward each parameter's "gradient ready" counts its bucket down; a complete
// bucket is launched, strictly in the plan's exchange order (exchange_order) on every
// rank, as a task on the communicator's worker thread, where its hook exchanges it while
// backward continues. finalize() waits for every bucket before the optimiser step, or,
// with a bucket update (overlap with the next forward), leaves each bucket to update
// itself and the next forward to wait per parameter. Every iteration stamps
// each bucket's ready, launch and exchange times (BucketTimes) for the Chrome trace;
// traced iterations add a barrier per bucket to measure the wait for peers apart.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/kernels/half.h"
#include "core/stream_sync.h"
#include "layers/flat_params.h"

namespace st {

struct Bucket {
  int id = 0;
  int64_t offset = 0;  // into the flat gradient buffer
  int64_t numel = 0;
  std::vector<Param*> params;  // in the order their gradients become ready
};

// What a bucket's exchange does. Runs on the communication thread; must issue the same
// collectives in the same order on every rank. Per-bucket state is keyed by bucket.id.
class BucketHook {
 public:
  virtual ~BucketHook() = default;
  virtual std::string name() const = 0;
  // `grads` is the bucket's view of the flat gradient buffer: on return it must hold
  // the update every rank applies (for plain data parallelism, the average).
  virtual void exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                        int64_t iteration) = 0;
};

// Dense averaging: the default hook. `wire` is the format values travel in
// (--comm-dtype): fp32 is one allreduce; bf16 or fp16 halves the bytes per value, the
// compression baseline (CPU tensors only; see exchange_16bit).
class AllreduceHook : public BucketHook {
 public:
  explicit AllreduceHook(Precision wire = Precision::F32) : wire_(wire) {}
  std::string name() const override {
    return wire_ == Precision::F32 ? "dense" : std::string("dense-") + precision_name(wire_);
  }
  void exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                int64_t iteration) override;

 private:
  void exchange_16bit(Tensor& grads, Communicator& comm) const;
  Precision wire_;
};

struct ReducerOptions {
  double first_bucket_mb = 1.0;  // DDP's small first bucket: communication starts early
  double bucket_cap_mb = 25.0;   // a huge cap gives one whole-model bucket (the papers' setting)
  // Launch buckets only after backward ends (the non-overlapped baseline for benchmarks).
  bool defer_until_finalize = false;
  // The share of the gradient elements, taken from the first layers' end of the buffer,
  // whose buckets are exchanged after all others and first layer first (exchange_order).
  double first_layers_first = 0;
};

// The order in which buckets are exchanged: every rank issues the same, so it depends on
// the plan only, never on timing. Bucket 0 holds the last layers (ready first in
// backward). The buckets holding the first `first_layers_first` of the elements (whole
// buckets, rounded down; at least none) are held back until backward has finished and
// then go first layer first, where the next forward needs them first; the others go in
// ready order, during backward. 0 gives ready order; 1 gives the reverse of it. The
// trade (P3, MLSys'19; ByteScheduler, SOSP'19): held-back buckets cannot overlap
// backward, but they arrive in the order the next forward consumes them.
std::vector<int> exchange_order(const std::vector<int64_t>& bucket_numels,
                                double first_layers_first);

// The bucket of each parameter, given the parameters' element counts in the order their
// gradients become ready: a bucket closes before the parameter that would take it past
// its cap (the first bucket's cap is first_bucket_mb, the others' bucket_cap_mb; 4 bytes
// an element); a parameter larger than the cap has a bucket of its own.
std::vector<int> cut_buckets(const std::vector<int64_t>& ready_numels, const ReducerOptions& opt);
// The parameters' element counts in the order their gradients become ready: reverse
// registration order, which is also the flat gradient buffer's order.
std::vector<int64_t> ready_numels(const FlatParams& flat);

// One bucket's life in one iteration, in ms since that iteration's begin_backward(). A
// stamp that did not happen is negative.
struct BucketTimes {
  int bucket = 0;
  int64_t numel = 0;
  int64_t iteration = 0;  // the count the exchange ran with (Reducer::iteration() before finalize)
  // The mark_grad_ready() that completed the bucket's countdown: its last gradient.
  double ready_ms = -1;
  // Handed to the communication thread. Buckets launch in exchange order, so a bucket
  // waits for every earlier one; with defer_until_finalize all launch in finalize().
  double launch_ms = -1;
  // Traced iterations only (Reducer::set_tracing): a barrier on the communication thread
  // right before the exchange; the time in it is the wait for the slowest peer to reach
  // this bucket.
  double wait_begin_ms = -1, wait_end_ms = -1;
  // The hook's exchange. The communication thread runs buckets one after another, so
  // exchange_begin_ms (or wait_begin_ms) minus launch_ms is time queued behind earlier buckets.
  double exchange_begin_ms = -1, exchange_end_ms = -1;
};

// One interval on the timeline, in ms since the iteration's begin_backward(); a mark
// has begin_ms == end_ms.
struct TimelineSpan {
  std::string name;
  std::string track;  // "backward", "comm"
  double begin_ms = 0, end_ms = 0;
};

class Reducer {
 public:
  Reducer(FlatParams& flat, Communicator& comm, std::shared_ptr<BucketHook> hook,
          ReducerOptions options = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const ReducerOptions& options() const { return opt_; }
  // The plan as text: one line per bucket (id, elements, MB, its parameters in the order
  // their gradients become ready), for --print-buckets and the tutorial.
  std::string describe_plan() const;
  BucketHook& hook() { return *hook_; }
  const BucketHook& hook() const { return *hook_; }
  // Call right before model.backward(): resets the countdowns and the stamps.
  void begin_backward();
  // Waits for every bucket; throws naming any parameter that never became ready, and
  // rethrows an exchange's error. Returns the time spent waiting (exposed communication).
  // With a bucket update set, launches what is left and returns without waiting.
  double finalize();

  // Overlap with the next forward. `make` is called on the training thread as each bucket
  // launches; the task it returns runs on the communication thread right after that
  // bucket's exchange (the bucket's share of the optimiser step, which must also finish
  // its device work before returning). Each parameter's Param::before_forward then waits
  // for its bucket, so the next forward starts on a layer as soon as its bucket is done,
  // and finalize() no longer waits. Set before the first begin_backward().
  using BucketUpdate = std::function<std::function<void()>(const Bucket&)>;
  void set_bucket_update(BucketUpdate make);
  // Waits for every launched bucket (its exchange and update) and rethrows the first
  // error: before gradients are zeroed, a checkpoint, evaluation or the end of training.
  // Returns the time spent waiting.
  double drain();
  // Changes ReducerOptions::first_layers_first between iterations (nothing in flight).
  // Collective in effect: every rank must set the same value before the same iteration.
  void set_first_layers_first(double share);
  // Whether that share holds back any bucket (whole buckets, rounded down): false when
  // every bucket goes in ready order.
  bool holds_back() const;
  int64_t iteration() const { return iteration_; }
  // A resumed run continues the iteration count (sparsifiers key rotation, warm-up and
  // random streams on it).
  void set_iteration(int64_t iteration) { iteration_ = iteration; }

  // Traced iterations put a barrier before every bucket's exchange, so the wait for late
  // peers is measured apart from the transfer (BucketTimes::wait_*). It is a collective
  // choice: every rank must set the same value for the same iterations. Takes effect at
  // the next begin_backward(); untraced iterations carry no extra barrier.
  void set_tracing(bool on) { tracing_next_ = on; }
  bool tracing() const { return tracing_next_; }

  // The last iteration's stamps, one entry per bucket in bucket order. Complete once
  // finalize() has returned.
  std::vector<BucketTimes> bucket_times() const;
  // The same iteration as a flat list: each bucket's ready mark on "backward" and its
  // exchange span on "comm" (launch marks and waits are only in bucket_times()).
  std::vector<TimelineSpan> timeline() const;
  double ms_since_begin() const;
  std::chrono::steady_clock::time_point begin_time() const { return t0_; }

 private:
  void on_grad_ready(Param& p);
  void launch(int b);
  // Waits for every bucket launched this iteration; returns the first exchange error.
  std::exception_ptr wait_for_launched() noexcept;
  // Sets one stamp of bucket b to now; the training and communication threads both stamp.
  void stamp(int b, double BucketTimes::*field);
  void run_exchange(int b, int64_t iteration, bool traced);
  // Param::before_forward with a bucket update: waits for the parameter's bucket.
  void wait_for_bucket_of(const Param& p);
  void update_after_exchange(int b);
  void apply_updates_held_for_backward();

  FlatParams& flat_;
  Communicator& comm_;
  std::shared_ptr<BucketHook> hook_;
  ReducerOptions opt_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;    // by Param::index
  std::vector<int> pending_;      // parameters still to become ready, per bucket
  std::vector<char> ready_seen_;  // by Param::index, this iteration
  std::vector<Work> work_;        // per bucket, this iteration
  std::vector<int> order_;        // bucket ids in exchange order
  BucketUpdate make_update_;
  // Guards the hand-over of each bucket's update between the communication thread (its
  // exchange ended) and finalize() (backward ended).
  std::mutex update_mu_;
  bool backward_done_ = false;
  // Where the compute stream is at finalize(): past every backward kernel the host has
  // queued. On an accelerator the host finishes queueing backward long before the
  // kernels run, and a layer's dx kernel reads W after it announced dW, so an update
  // on the communication thread waits for this position, not only the bucket's ready one.
  StreamPosition backward_end_;
  std::vector<char> exchanged_;                 // per bucket: exchange ended during backward
  std::vector<std::function<void()>> updates_;  // per bucket, this iteration
  int next_launch_ = 0;                         // into order_
  int64_t iteration_ = 0;
  bool in_backward_ = false;
  bool tracing_next_ = false, traced_iteration_ = false;
  std::chrono::steady_clock::time_point t0_;
  mutable std::mutex times_mu_;
  std::vector<BucketTimes> times_;  // per bucket, this iteration
};

}  // namespace st
