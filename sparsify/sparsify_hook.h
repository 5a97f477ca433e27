// SparsifyHook: a bucket exchange that compresses (docs/ALGORITHMS.md, shared machinery):
//   x = grad + residual                      (error feedback)
//   selection = sparsifier.select_on(x)      (the method)
//   exchange by the sparsifier's pattern     (union-allreduce, allgather-sum, ...)
//   bucket grads = aggregated result / P     (what every rank applies)
//   residual = x - what this rank contributed (zero with --sp ef=off)
// Every pass over bucket data and every collective on it is a bulk::Ops call on the
// bucket's device (one Ops per hook, sparsify/bulk/bulk_ops.h): the hook itself moves
// only the few scalars the rules need (counts, thresholds) to the host, so the same
// orchestration runs on CPU and CUDA buckets. Per-bucket state (residual, scratch) lives
// here keyed by bucket id; the sparsifier keeps its own per-bucket rule state. Runs on
// the communication thread.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "comm/reducer.h"
#include "sparsify/bulk/timing_ops.h"
#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

// One bucket at one iteration: the sp_* statistics of the metrics log (docs/SPARSIFIERS.md).
// Phases, each wall time on the communication thread, never overlapping (the exchange
// patterns mark the phase boundaries, the timing decorator around the hook's bulk::Ops
// times the collectives; bulk/timing_ops.h states the attribution rule):
//   ef_ms      x = grad + residual (error feedback)
//   select_ms  Sparsifier::select_on (partition_ms and estimate_ms are parts of it when the
//              method times them)
//   pack_ms    building the messages from the selection (padding indices, gathering x
//              at the result positions, PowerSGD's second message)
//   comm_ms    inside collectives (counts, indices, values, packed words)
//   decode_ms  receive side: union, unpacking and summing the P payloads, inverse
//              transform, writing the averaged result into the bucket
//   update_ms  the residual: x minus this rank's contribution
// exchange_ms covers pack + comm + decode + update (and bookkeeping); total_ms the whole
// call, ef + select + exchange + the residual norm.
struct SparsifyStats {
  int64_t iteration = 0;
  int bucket = 0;
  int64_t n = 0;
  int64_t k = 0;             // user target floor(d n)
  int64_t local_count = 0;   // this rank's selected count (low-rank: floats it sends)
  int64_t global_count = 0;  // values in the aggregated result (low-rank: floats summed)
  // The positions those counts are out of: n, or a transform method's coefficients
  // (sparsifier.h's domain_size); 0 means n.
  int64_t domain = 0;
  double actual_density = 0;  // global_count / domain
  double threshold = 0;
  double padding_overhead = 0;  // max_i k_i * P / sum_i k_i - 1
  // The same as slots: P max_i k_i and sum_i k_i (0 for patterns without a padded
  // gather), so an iteration's padding can be weighted over its buckets.
  int64_t padded_slots = 0, counted_slots = 0;
  double ef_ms = 0, select_ms = 0, partition_ms = 0, estimate_ms = 0;
  double pack_ms = 0, comm_ms = 0, decode_ms = 0, update_ms = 0;
  double exchange_ms = 0, total_ms = 0;
  double residual_norm =
      0;  // L2 norm of this rank's residual after the update (--sp ef=off: of what was dropped)
  int64_t bytes_sent = 0;  // payload this rank put on the wire
  bool dense = false;      // dense warm-up iteration
};

// Gives a sparsifier a side input per bucket (SelectContext::aux_buffer): a tensor of
// bucket.numel floats on the bucket's device, or an undefined tensor for none. Called on the
// communication thread once the bucket's gradients are final (VGC: per-sample squared-gradient
// sums).
using AuxProvider = std::function<Tensor(const Bucket&)>;

// Where an index-selection method chooses (--sp scope): in each bucket (the default), or
// in each tensor of the bucket (layer-wise). The whole model is one bucket with a huge
// --bucket-cap-mb.
enum class SelectScope { Bucket = 0, Tensor = 1 };

class SparsifyHook : public BucketHook {
 public:
  // Where the method selects, as --sp scope was parsed (the key's owner reads it).
  SelectScope scope() const { return scope_; }
  // The --sp keys the hook reads for every method (scope, min_tensor); the registry
  // accepts them next to each method's own keys.
  static const std::vector<SpKey>& keys();
  // Tensor scope: select_on() runs once per tensor as its own selection unit, with this id
  // as SelectContext::bucket (per-tensor rule state) and k = floor(d * tensor size).
  static int unit_id(int bucket, size_t segment) {
    return bucket * kUnitsPerBucket + static_cast<int>(segment);
  }
  static constexpr int kUnitsPerBucket = 1 << 16;

  SparsifyHook(SparsifierPtr sparsifier, SparsifierOptions options, int64_t dense_warmup_iters = 0);
  std::string name() const override;
  void exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                int64_t iteration) override;

  Sparsifier& sparsifier() { return *sparsifier_; }
  // The bulk implementation the hook runs on (inside its timing decorator); by default
  // make_ops(device of the first bucket). Tests install a checking one before the first
  // exchange.
  void use_ops(bulk::OpsPtr ops);
  void set_aux_provider(AuxProvider provider) { aux_ = std::move(provider); }
  // Statistics of every bucket exchanged since the last call.
  std::vector<SparsifyStats> take_stats();
  // Error-feedback residual of a bucket (zeros before its first exchange).
  Tensor residual(int bucket) const;
  // Checkpointing: this rank's error-feedback residuals and the sparsifier's rule state
  // (call between iterations, when no exchange runs). load_state() checks the method.
  std::vector<uint8_t> save_state() const;
  void load_state(StateReader& in);
  // After load_state(): throws when a restored residual does not fit the reducer's bucket
  // plan (a checkpoint written with other --bucket-cap-mb / --first-bucket-mb), so the run
  // stops at start instead of inside an exchange; `hint` ends the message (what to pass).
  void check_bucket_plan(const std::vector<Bucket>& buckets, const std::string& hint) const;
  // What this rank selected in the bucket's last exchange, copied to the host (tests).
  Selection last_selection(int bucket) const;
  // Aggregated positions of the bucket's last exchange, identical on all ranks (tests).
  std::vector<int32_t> last_result_indices(int bucket) const;

 private:
  // A tensor of the bucket in tensor scope: [begin, end), sent whole when small.
  struct Unit {
    int64_t begin = 0, end = 0;
    int id = 0;
    int64_t k = 0;
    bool dense = false;
  };
  // Rank r's indices after an exchange, for the per-tensor feedback: `count` entries of
  // `idx` from `begin`.
  struct RankSlice {
    const bulk::Buffer* idx = nullptr;
    int64_t begin = 0, count = 0;
  };
  using RankIndices = std::function<RankSlice(int)>;

  struct BucketState {
    Tensor residual;          // on the bucket's device
    std::vector<Unit> units;  // tensor scope only
    DeviceSelection selection;
    bulk::Buffer result;  // I32 positions in the aggregated result
    // Exchange scratch, kept between iterations so buffers do not reallocate.
    bulk::Buffer mine, idx_all, val_all, words_all, values, domain, tmp, m1, m2;
    DeviceSelection one;                // one rank's unpacked message
    std::vector<DeviceSelection> unit;  // tensor scope: each tensor's selection
  };
  // One exchange's buffers: x (the residual, holding grad + residual) and g (the bucket).
  struct Bufs {
    bulk::Buffer& x;
    bulk::Buffer& g;
    int64_t n;
  };
  void exchange_union(BucketState& s, const SelectContext& ctx, Bufs b, Communicator& comm,
                      SparsifyStats& st);
  void exchange_allgather(BucketState& s, const SelectContext& ctx, Bufs b, Communicator& comm,
                          SparsifyStats& st);
  // The packed wire format: allgathers the words and unpacks every rank's message into
  // s.idx_all / s.val_all.
  void gather_packed(BucketState& s, const SelectContext& ctx, int64_t n,
                     const std::vector<int64_t>& counts, Communicator& comm, SparsifyStats& st);
  void exchange_indices(BucketState& s, const SelectContext& ctx, Bufs b, Communicator& comm,
                        SparsifyStats& st);
  void exchange_dense(BucketState& s, Bufs b, Communicator& comm, SparsifyStats& st);
  void exchange_low_rank(BucketState& s, const SelectContext& ctx, Bufs b, Communicator& comm,
                         SparsifyStats& st);
  void warmup_exchange(const Bucket& bucket, Tensor& grads, Communicator& comm, SparsifyStats& st);
  // Error feedback, selection, the pattern, the residual's norm (iterations past warm-up).
  void sparse_exchange(const Bucket& bucket, Tensor& grads, Communicator& comm, int64_t iteration,
                       SparsifyStats& st);
  BucketState& bucket_state(const Bucket& bucket, const Tensor& grads);
  // The sparsifier's exchange pattern (exchange_patterns.cpp).
  void run_pattern(BucketState& s, const SelectContext& ctx, Bufs b, Communicator& comm,
                   SparsifyStats& st);
  // The phase times of the exchange that just ran, from the phase clock.
  void record_phases(SparsifyStats& st) const;
  // Starts the next phase of the exchange (the timing decorator times the collectives).
  void phase(bulk::Phase p) { clock_.enter(p); }
  // Start offsets and first dimensions of the bucket's tensors (tensor_scope.cpp).
  static void tensor_segments(const Bucket& bucket, const Tensor& grads, SelectContext& ctx);
  // The context of one bucket at one iteration (side-input buffers set by the caller).
  SelectContext make_context(const Bucket& bucket, const Tensor& grads, const Communicator& comm,
                             int64_t iteration) const;
  // Runs select_on() on the bucket, or once per tensor in tensor scope.
  void select_scoped(BucketState& s, const SelectContext& ctx, const bulk::Buffer& x, int64_t n);
  // observe() for the bucket, or once per (non-dense) tensor in tensor scope.
  void feed_back(const BucketState& s, const SelectContext& ctx, int64_t n, int64_t global,
                 const std::vector<int64_t>& counts, const RankIndices& rank_indices);
  // One int per rank, allgathered through the bulk implementation.
  std::vector<int64_t> allgather_counts(Communicator& comm, int64_t mine);
  // Throws when an index buffer holds a position outside [0, domain).
  void check_positions(const bulk::Buffer& idx, int64_t domain, const char* what, int bucket);
  bulk::Ops& ops_for(const Tensor& grads);

  SparsifierPtr sparsifier_;
  SparsifierOptions opt_;
  SelectScope scope_ = SelectScope::Bucket;
  int64_t min_tensor_ = 0;
  bool error_feedback_ = true;  // --sp ef
  AuxProvider aux_;
  int64_t dense_warmup_;
  std::map<int, BucketState> state_;
  bulk::PhaseClock clock_;  // before ops_, whose timing decorator reports to it
  bulk::OpsPtr ops_;
  bulk::Buffer count_in_, count_all_;  // allgather_counts
  mutable std::mutex stats_mu_;
  std::vector<SparsifyStats> stats_;
};

}  // namespace st
