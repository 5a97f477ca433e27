#include "comm/reducer.h"

#include <cstdio>
#include <exception>
#include <sstream>

#include "core/emu/launch.h"
#include "core/ops.h"
#include "core/stream_sync.h"
#ifdef SPARSETRAIN_WITH_CUDA
#include "core/cuda/half.h"
#endif

namespace st {

void AllreduceHook::exchange(const Bucket&, Tensor& grads, Communicator& comm, int64_t) {
  if (wire_ != Precision::F32) {
    exchange_16bit(grads, comm);
  } else {
    comm.allreduce(grads, ReduceOp::Sum);
    scale_inplace(grads, 1.0f / static_cast<float>(comm.size()));
  }
  // The scaling (or the 16-bit sum) ran on this (communication) thread's stream; the
  // optimiser runs on the compute stream after finalize(), so finish it here.
  synchronize_current_stream(grads.device());
}

// MPI has no built-in 16-bit floating type (a user-defined MPI_Op_create over a 16-bit
// datatype could sum one), but a sum in 16 bits rounds at every hop of the reduction. So
// this is an allgather-then-sum exchange, which sums in fp32 and gives every rank the same
// bits: each rank divides its gradient by P (the
// average's factor, applied first so the 16-bit values do not overflow where the fp32
// sum would not), rounds it to the wire format, packed two values per 32-bit word; the
// allgather delivers every rank's message, and every rank sums them in fp32 in rank
// order, so all ranks hold bit-identical results: sum_r round16(g_r / P). Received
// bytes per rank are 2n(P-1), against about 8n(P-1)/P for a ring fp32 allreduce: less
// for P < 4, more beyond (a reduce-scatter in 16 bits would need a custom MPI_Op).
// CUDA gradients take the same steps on the device, the allgather over NCCL (which could
// sum 16-bit values itself, but in an order of its own; this way both devices compute
// one formula and every rank holds the same bits).
namespace {
// The 16-bit conversions on the gradient's device (core/kernels/half.h, core/cuda/half.h):
// `words` holds the packed values, `at` is the first word.
void pack_half_on(Precision p, const Tensor& g, float scale, Tensor& words) {
  if (g.device().is_emu()) {
    emu::launch(g.device().index, [p, g, scale, words] {
      Tensor w = words.as_host_memory();
      pack_half_on(p, g.as_host_memory(), scale, w);
    });
    return;
  }
  auto* out = static_cast<uint16_t*>(words.raw());
#ifdef SPARSETRAIN_WITH_CUDA
  if (g.device().is_cuda()) return cuda::pack_half(p, g.f32(), scale, out, g.numel());
#endif
  cpu::pack_half(p, g.f32(), scale, out, g.numel());
}

void add_half_on(Precision p, const Tensor& words, int64_t at, Tensor& g) {
  if (g.device().is_emu()) {
    emu::launch(g.device().index, [p, words, at, g] {
      Tensor h = g.as_host_memory();
      add_half_on(p, words.as_host_memory(), at, h);
    });
    return;
  }
  const auto* in = static_cast<const uint16_t*>(words.raw()) + 2 * at;
#ifdef SPARSETRAIN_WITH_CUDA
  if (g.device().is_cuda()) return cuda::add_half(p, in, g.f32(), g.numel());
#endif
  cpu::add_half(p, in, g.f32(), g.numel());
}
}  // namespace

void AllreduceHook::exchange_16bit(Tensor& grads, Communicator& comm) const {
  const int64_t n = grads.numel(), words = (n + 1) / 2, p = comm.size();
  const Device device = grads.device();
  Tensor mine = Tensor::zeros({words}, DType::I32, device);
  pack_half_on(wire_, grads, 1.0f / static_cast<float>(p), mine);
  Tensor all = Tensor::empty({p * words}, DType::I32, device);
  comm.allgather(mine, all);
  grads.zero();
  for (int64_t r = 0; r < p; ++r) add_half_on(wire_, all, r * words, grads);
}

std::vector<int> cut_buckets(const std::vector<int64_t>& ready_numels, const ReducerOptions& opt) {
  std::vector<int> bucket_of;
  int64_t filled = 0;  // elements in the bucket being filled
  for (const int64_t numel : ready_numels) {
    const int current = bucket_of.empty() ? 0 : bucket_of.back();
    const double cap_mb = current == 0 ? opt.first_bucket_mb : opt.bucket_cap_mb;
    const bool full =
        !bucket_of.empty() && static_cast<double>((filled + numel) * 4) > cap_mb * (1 << 20);
    bucket_of.push_back(current + (full ? 1 : 0));
    filled = full ? numel : filled + numel;
  }
  return bucket_of;
}

std::vector<int> exchange_order(const std::vector<int64_t>& bucket_numels,
                                double first_layers_first) {
  const int n = static_cast<int>(bucket_numels.size());
  int64_t total = 0;
  for (const int64_t numel : bucket_numels) total += numel;
  const double budget = first_layers_first * static_cast<double>(total);
  int first_held = n;  // buckets [first_held, n) are held back
  int64_t held = 0;
  while (first_held > 0 && static_cast<double>(held + bucket_numels[first_held - 1]) <= budget) {
    held += bucket_numels[first_held - 1];
    --first_held;
  }
  std::vector<int> order;
  for (int b = 0; b < first_held; ++b) order.push_back(b);
  for (int b = n - 1; b >= first_held; --b) order.push_back(b);
  return order;
}

std::vector<int64_t> ready_numels(const FlatParams& flat) {
  std::vector<int64_t> numels;
  for (auto it = flat.params().rbegin(); it != flat.params().rend(); ++it)
    numels.push_back((*it)->value.numel());
  return numels;
}

Reducer::Reducer(FlatParams& flat, Communicator& comm, std::shared_ptr<BucketHook> hook,
                 ReducerOptions options)
    : flat_(flat), comm_(comm), hook_(std::move(hook)), opt_(options) {
  ST_CHECK(hook_ != nullptr, "Reducer: no bucket hook");
  ST_CHECK(opt_.first_bucket_mb > 0 && opt_.bucket_cap_mb > 0,
           "--bucket-cap-mb and the first bucket size must be positive, got ", opt_.bucket_cap_mb);
  const auto& params = flat.params();
  bucket_of_.assign(params.size(), -1);
  // In ready order (= flat buffer order), as ready_numels lists them.
  const std::vector<int> cut = cut_buckets(ready_numels(flat), opt_);
  size_t i = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it, ++i) {
    Param* p = *it;
    if (buckets_.size() <= static_cast<size_t>(cut[i])) {
      Bucket b;
      b.id = static_cast<int>(buckets_.size());
      b.offset = flat.offset(*p);
      buckets_.push_back(b);
    }
    Bucket& b = buckets_.back();
    ST_CHECK(flat.offset(*p) == b.offset + b.numel, "Reducer: parameter ", p->name,
             " is not contiguous with its bucket in the flat gradient buffer");
    b.params.push_back(p);
    b.numel += p->value.numel();
    bucket_of_[p->index] = b.id;
  }
  // Every rank must cut the same plan, or collectives would pair up wrongly.
  // (Unsigned arithmetic: the hash wraps around, which signed overflow may not.)
  uint64_t signature = buckets_.size();
  for (const Bucket& b : buckets_)
    signature = signature * 1000003u + static_cast<uint64_t>(b.numel);
  comm_.check_same_on_all_ranks(static_cast<int64_t>(signature),
                                "the gradient bucket plan (model or --bucket-cap-mb)");
  set_first_layers_first(opt_.first_layers_first);
  pending_.assign(buckets_.size(), 0);
  exchanged_.assign(buckets_.size(), 0);
  updates_.assign(buckets_.size(), nullptr);
  work_.assign(buckets_.size(), Work());
  times_.assign(buckets_.size(), BucketTimes());
  ready_seen_.assign(params.size(), 0);
  for (Param* p : params) p->on_grad_ready = [this](Param& q) { on_grad_ready(q); };
}

std::string Reducer::describe_plan() const {
  std::ostringstream out;
  out << "bucket plan: " << buckets_.size() << " buckets over " << flat_.numel()
      << " gradient elements (first bucket " << opt_.first_bucket_mb << " MB, then "
      << opt_.bucket_cap_mb << " MB)\n";
  for (const Bucket& b : buckets_) {
    out << "  bucket " << b.id << ": " << b.numel << " elements, "
        << static_cast<double>(b.numel) * 4.0 / (1 << 20) << " MB:";
    for (const Param* p : b.params) out << " " << p->name;
    out << "\n";
  }
  return out.str();
}

Reducer::~Reducer() {
  // The communication thread may still be exchanging buckets that point into this
  // reducer, its hook and the flat buffer: the reducer goes only after its launched work
  // has finished, also while an exception unwinds (an error on one rank). Those are
  // collectives every live rank also runs, so they complete; then the caller can end the
  // job. (A dead peer ends the whole MPI job anyway.)
  wait_for_launched();
  for (Param* p : flat_.params()) {
    p->on_grad_ready = nullptr;
    p->before_forward = nullptr;
  }
}

void Reducer::set_first_layers_first(double share) {
  ST_CHECK(!in_backward_, "Reducer: the exchange order changed during a backward");
  for (const Work& w : work_) ST_CHECK(w.done(), "Reducer: the exchange order changed in flight");
  opt_.first_layers_first = share;
  std::vector<int64_t> bucket_numels;
  for (const Bucket& b : buckets_) bucket_numels.push_back(b.numel);
  order_ = exchange_order(bucket_numels, share);
}

bool Reducer::holds_back() const {
  for (size_t i = 0; i < order_.size(); ++i)
    if (order_[i] != static_cast<int>(i)) return true;
  return false;
}

void Reducer::set_bucket_update(BucketUpdate make) {
  ST_CHECK(!in_backward_, "Reducer: set_bucket_update() during a backward");
  make_update_ = std::move(make);
  for (Param* p : flat_.params()) {
    if (make_update_)
      p->before_forward = [this](Param& q) { wait_for_bucket_of(q); };
    else
      p->before_forward = nullptr;
  }
}

void Reducer::wait_for_bucket_of(const Param& p) {
  work_[static_cast<size_t>(bucket_of_[p.index])].wait();
}

double Reducer::drain() {
  const auto start = std::chrono::steady_clock::now();
  if (std::exception_ptr error = wait_for_launched()) std::rethrow_exception(error);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::exception_ptr Reducer::wait_for_launched() noexcept {
  std::exception_ptr first;
  for (Work& w : work_) {
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
    w = Work();
  }
  return first;
}

void Reducer::begin_backward() {
  ST_CHECK(!in_backward_, "Reducer: begin_backward() twice without finalize()");
  // The previous step's buckets may still be in flight (overlap with the forward):
  // their stamps and their gradients belong to that step.
  drain();
  in_backward_ = true;
  {
    std::lock_guard<std::mutex> lock(update_mu_);
    backward_done_ = false;
    std::fill(exchanged_.begin(), exchanged_.end(), 0);
  }
  for (const Bucket& b : buckets_) pending_[b.id] = static_cast<int>(b.params.size());
  std::fill(ready_seen_.begin(), ready_seen_.end(), 0);
  next_launch_ = 0;
  traced_iteration_ = tracing_next_;
  t0_ = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(times_mu_);
  for (const Bucket& b : buckets_) {
    BucketTimes t;
    t.bucket = b.id;
    t.numel = b.numel;
    t.iteration = iteration_;
    times_[b.id] = t;
  }
}

double Reducer::ms_since_begin() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

void Reducer::on_grad_ready(Param& p) {
  if (!in_backward_) return;  // a backward outside training (e.g. a gradient check)
  ST_CHECK(!ready_seen_[p.index], "Reducer: parameter ", p.name,
           " announced gradient-ready twice in one backward");
  ready_seen_[p.index] = 1;
  const int b = bucket_of_[p.index];
  if (--pending_[b] > 0) return;
  stamp(b, &BucketTimes::ready_ms);  // this was the bucket's last gradient
  if (opt_.defer_until_finalize) return;
  // Launch strictly in bucket order, so every rank issues the same collective sequence.
  while (next_launch_ < static_cast<int>(order_.size()) && pending_[order_[next_launch_]] == 0)
    launch(order_[next_launch_++]);
}

void Reducer::stamp(int b, double BucketTimes::*field) {
  const double now = ms_since_begin();
  std::lock_guard<std::mutex> lock(times_mu_);
  times_[b].*field = now;
}

void Reducer::launch(int b) {
  stamp(b, &BucketTimes::launch_ms);
  const int64_t iteration = iteration_;
  const bool traced = traced_iteration_;
  // On an accelerator the bucket's gradients are final only when the compute stream
  // reaches this point. Record an event there; the communication thread blocks on it on
  // the host (the exchange after it is driven from the host: MPI, a sparsifier's host
  // values), while the compute stream runs on with backward. Each collective then also
  // makes its own stream wait on the device (the communicators), as DDP and llm.c do.
  const StreamPosition ready = StreamPosition::record_current(flat_.grads().device());
  if (make_update_) {
    std::function<void()> update = make_update_(buckets_[b]);
    std::lock_guard<std::mutex> lock(update_mu_);
    updates_[b] = std::move(update);
  }
  work_[b] = comm_.submit([this, b, iteration, traced, ready] {
    ready.wait();
    run_exchange(b, iteration, traced);
    if (make_update_) update_after_exchange(b);
  });
}

// A layer's backward may still read its weights after announcing their gradients (dx
// needs W), so no bucket is updated before backward has ended: a bucket exchanged
// earlier leaves its update to finalize(), one exchanged later applies it here once the
// compute stream has passed every backward kernel (on an accelerator the host ends
// backward when it has queued it, not when it has run).
void Reducer::update_after_exchange(int b) {
  std::function<void()> update;
  StreamPosition backward_end;
  {
    std::lock_guard<std::mutex> lock(update_mu_);
    if (backward_done_) {
      update = std::move(updates_[b]);
      backward_end = backward_end_;
    } else {
      exchanged_[b] = 1;
    }
  }
  if (!update) return;
  backward_end.wait();
  update();
}

// At finalize(): the buckets whose exchange ended during backward, updated on this thread.
void Reducer::apply_updates_held_for_backward() {
  std::vector<std::function<void()>> held;
  const StreamPosition backward_end = StreamPosition::record_current(flat_.grads().device());
  {
    std::lock_guard<std::mutex> lock(update_mu_);
    backward_end_ = backward_end;
    backward_done_ = true;
    for (size_t b = 0; b < buckets_.size(); ++b)
      if (exchanged_[b]) held.push_back(std::move(updates_[b]));
  }
  for (const auto& update : held) update();
}

// On the communication thread. A collective's duration mixes two things: waiting until
// the slowest rank arrives, and moving the data. A traced iteration separates them with
// a barrier first (every rank leaves it within about one barrier latency, so the exchange
// after it is mostly transfer); the barrier costs that latency per bucket, which is why
// only traced iterations pay it.
void Reducer::run_exchange(int b, int64_t iteration, bool traced) {
  if (traced) {
    stamp(b, &BucketTimes::wait_begin_ms);
    comm_.barrier();
    stamp(b, &BucketTimes::wait_end_ms);
  }
  const Bucket& bucket = buckets_[b];
  Tensor grads = flat_.grads().slice_flat(bucket.offset, Shape{bucket.numel});
  stamp(b, &BucketTimes::exchange_begin_ms);
  hook_->exchange(bucket, grads, comm_, iteration);
  stamp(b, &BucketTimes::exchange_end_ms);
}

double Reducer::finalize() {
  ST_CHECK(in_backward_, "Reducer: finalize() without begin_backward()");
  const auto start = std::chrono::steady_clock::now();
  for (const Bucket& b : buckets_) {
    if (pending_[b.id] == 0) continue;
    for (Param* p : b.params)
      ST_CHECK(ready_seen_[p->index], "Reducer: parameter ", p->name, " (bucket ", b.id,
               ") never announced gradient-ready in this backward; every parameter must take "
               "part in the loss");
  }
  while (next_launch_ < static_cast<int>(order_.size())) launch(order_[next_launch_++]);
  in_backward_ = false;
  ++iteration_;
  // The next forward waits per parameter (before_forward) and drain() for the rest.
  if (make_update_) {
    apply_updates_held_for_backward();
    return 0;
  }
  // Every bucket finishes before an exchange's error is rethrown, so nothing in flight
  // outlives the unwinding.
  if (std::exception_ptr error = wait_for_launched()) std::rethrow_exception(error);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::vector<BucketTimes> Reducer::bucket_times() const {
  std::lock_guard<std::mutex> lock(times_mu_);
  return times_;
}

std::vector<TimelineSpan> Reducer::timeline() const {
  std::vector<TimelineSpan> spans;
  for (const BucketTimes& t : bucket_times()) {
    const std::string id = "bucket " + std::to_string(t.bucket);
    if (t.ready_ms >= 0) spans.push_back({"ready " + id, "backward", t.ready_ms, t.ready_ms});
    if (t.exchange_end_ms >= 0)
      spans.push_back({hook_->name() + " " + id + " (" + std::to_string(t.numel) + " floats)",
                       "comm", t.exchange_begin_ms, t.exchange_end_ms});
  }
  return spans;
}

}  // namespace st
