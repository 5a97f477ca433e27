// Sparsifier: the selection rule of a gradient-compression method (docs/ALGORITHMS.md). The
// SparsifyHook around it does everything the methods share: error feedback, the
// exchange pattern, writing the averaged result back into the bucket, statistics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/state_io.h"

namespace st {

// How selections travel (docs/ALGORITHMS.md, "Exchange patterns").
enum class ExchangePattern {
  // Allgather counts and (padded) indices, take the union, allreduce x at the union.
  // Every rank contributes x at every union position. (Top-k, MiCRO, ExDyna, ...)
  UnionAllreduce,
  // Allgather (index, value) pairs of every rank and scatter-add them. A rank contributes
  // only the values it selected. (SIDCo, Gaussian-k, DGC, global Top-k, ...)
  AllgatherSum,
  // Every rank selects the same indices (shared seed): allreduce the values directly.
  SharedIndices,
  // Rank (t mod P) selects; its indices are broadcast; everyone allreduces there (CLT-k).
  LeaderIndices,
  // No compression: allreduce the whole bucket.
  Dense,
  // Two allreduces of dense messages, the second computed from the sum of the first
  // (PowerSGD: P = M Q, then Q = M^T orth(P)); decode() maps the second message back
  // to the bucket. No indices travel.
  LowRank,
};
// Its name in `sparsetrain sparsifiers [--json]`: union-allreduce, allgather-sum,
// shared-indices, leader-indices, dense, low-rank (scripts/scaling_model.py prices each one).
const char* pattern_name(ExchangePattern p);

// What a sparsifier sees for one bucket at one iteration.
// The elements a density d keeps of n: k = floor(d n), at least one (every method's
// target; the papers' k = d n rounded down).
inline int64_t kept_count(double density, int64_t n) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::floor(density * static_cast<double>(n))));
}

struct SelectContext {
  int bucket = 0;
  int64_t iteration = 0;  // t, counted from the first sparsified iteration
  int rank = 0;
  int world = 1;
  double density = 0.01;  // d
  int64_t k = 0;          // kept_count(d, n)
  uint64_t seed = 0;
  // Side inputs for methods that need more than x (null / empty when unavailable):
  std::vector<int64_t> segments;  // start offsets of the bucket's tensors, ascending
  std::vector<int64_t> rows;      // each segment's first dimension (1 for a vector)
  // Buffers on the bulk device, n elements each: this step's raw bucket gradient before
  // error feedback, and n floats from the hook's aux provider (VGC: squared gradients).
  const bulk::Buffer* grad_buffer = nullptr;
  const bulk::Buffer* aux_buffer = nullptr;
};

// A rank's selection copied to the host (SparsifyHook::last_selection, tests): the
// fields of DeviceSelection below.
struct Selection {
  std::vector<int32_t> indices;
  std::vector<float> values;
  std::vector<uint32_t> packed;
  double threshold = 0.0;
  double partition_ms = 0.0, estimate_ms = 0.0;
  void clear() {
    indices.clear();
    values.clear();
    packed.clear();
    threshold = 0.0;
    partition_ms = estimate_ms = 0.0;
  }
};

// A rank's selection as buffers on the bulk device (Sparsifier::select_on), never read by
// the method or the hook except through bulk::Ops: positions in the bucket and the values
// it contributes there. For UnionAllreduce / SharedIndices / LeaderIndices only `indices`
// matter (the hook reads x); for AllgatherSum `values` are what is sent (possibly
// quantised) and the residual keeps x - value.
//
// Methods that quantise (Sparsifier::packs()) also fill `packed`, their wire format: the
// hook allgathers those words instead of (int32 index, float32 value) pairs, and every
// rank decodes each message with Sparsifier::unpack_on(). `values` are then the
// dequantised values, exactly what unpack_on() yields (the hook checks this on its own
// message).
//
// Transform-domain methods (Sparsifier::transform_domain(), FFT) select positions in
// their coefficient domain of domain_size() entries, not in the bucket.
struct DeviceSelection {
  bulk::Buffer indices;    // I32
  bulk::Buffer values;     // F32, as many as indices, or empty (the hook gathers x there)
  bulk::Buffer packed;     // U32 wire words (Sparsifier::packs())
  double threshold = 0.0;  // the threshold the rule used, for statistics (0 = none)
  // Optional sub-phases of select_on() for the statistics (sp_partition_ms,
  // sp_estimate_ms): a method that partitions the bucket or estimates a threshold
  // before selecting may time those steps here; 0 = not split out.
  double partition_ms = 0.0, estimate_ms = 0.0;
  void clear_scalars() {
    threshold = 0.0;
    partition_ms = estimate_ms = 0.0;
  }
};

// What the exchange found, fed back to rules that adapt (MiCRO's threshold, ExDyna's
// partitions, SIDCo's stage count). Identical on every rank.
struct ExchangeFeedback {
  int bucket = 0;
  int64_t iteration = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t global_count = 0;          // values in the aggregated result
  std::vector<int64_t> rank_counts;  // each rank's selected count (allgathered)
  // LowRank: the second message summed over the ranks, on the bulk device (PowerSGD's
  // warm start keeps its average); null for the other patterns.
  const bulk::Buffer* summed_buffer = nullptr;
  int64_t summed_size = 0;
};

// Options from the command line: --density, --seed and --sp key=value pairs. The pairs
// are checked against the method's declared keys by the registry (sparsify/sp_keys.h).
struct SparsifierOptions {
  double density = 0.01;
  uint64_t seed = 0;
  std::map<std::string, std::string> params;
};

class Sparsifier {
 public:
  virtual ~Sparsifier() = default;
  virtual std::string name() const = 0;
  virtual ExchangePattern pattern() const = 0;
  // Does each rank select only inside its own exclusive partition of the bucket (n / P
  // elements; MiCRO, ExDyna)? Selection cost then falls with P and selections never overlap.
  virtual bool partitioned() const { return false; }
  // Does the rule promise at least one element per rank and bucket (MiCRO, Top-k)?
  virtual bool sends_at_least_one() const { return true; }
  // Selects on x (gradient plus residual) of one bucket: x (x.size() == n) and the result
  // stay behind `ops`, so the same code runs on CPU and CUDA buckets. For LeaderIndices
  // only the leader's selection is used; the others may leave `out` empty.
  virtual void select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                         DeviceSelection& out) = 0;
  // Called on every rank after each exchange, with the same feedback everywhere.
  virtual void observe(const ExchangeFeedback&) {}
  // A number that must agree across ranks when the rule's state does (thresholds,
  // partitions); the conformance suite compares it. 0 = stateless.
  virtual double state_signature(int /*bucket*/) const { return 0.0; }
  // Checkpointing: everything select() and observe() carry from one iteration to the next
  // (thresholds, partitions, momenta), written and read back in the same order, so a
  // resumed run continues exactly. Methods without such state keep the empty defaults.
  virtual void save_state(StateWriter& /*out*/) const {}
  virtual void load_state(StateReader& /*in*/) {}

  // --- Optional extensions (AllgatherSum only); the defaults keep plain behaviour. ---
  // Packed wire format: select_on() fills DeviceSelection::packed; unpack_on() turns one
  // rank's message back into (index, dequantised value) pairs.
  virtual bool packs() const { return false; }
  // Transform domain: selections index a coefficient space of domain_size() entries;
  // the hook sums the ranks' coefficients there and decode_on() maps a coefficient vector
  // back to the n bucket positions (linear). The residual is x - decode(own selection).
  virtual bool transform_domain() const { return false; }
  virtual int64_t domain_size(const SelectContext& /*ctx*/, int64_t n) const { return n; }

  // LowRank pattern (PowerSGD): select_on() puts the first message in
  // DeviceSelection::values; the hook allreduce-sums it and calls second_message_on() with
  // that sum; it allreduce-sums the second message and calls decode_on() on the sum (the
  // update, divided by P) and on its own message (the contribution: the residual is
  // x - decode(own), exact because decode is linear in the second message).

  // The extensions' passes, on buffers of `ops`'s device like select_on(); a method that
  // packs, works in a transform domain or is low-rank overrides the ones it uses (the
  // defaults throw, naming the method).
  // One rank's message: the `count` words of `words` from `offset`; fills out.indices and
  // out.values (as many as indices), never out.packed.
  virtual void unpack_on(bulk::Ops& ops, const SelectContext& ctx, int64_t n,
                         const bulk::Buffer& words, int64_t offset, int64_t count,
                         DeviceSelection& out) const;
  // `coeffs` (the coefficient vector, or the low-rank second message) to the n bucket
  // positions; `out` is resized to n F32.
  virtual void decode_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& coeffs,
                         int64_t n, bulk::Buffer& out);
  // From x (n = x.size()) and the summed first message; `out` is resized to the second
  // message's length (F32).
  virtual void second_message_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                                 const bulk::Buffer& first_sum, bulk::Buffer& out);
};

// A method that sends the packed wire format of the allgather-sum exchange (QSGD,
// TernGrad, signSGD, FFT, VGC): select_on() fills DeviceSelection::packed, unpack_on()
// decodes one rank's message.
class PackedSparsifier : public Sparsifier {
 public:
  ExchangePattern pattern() const override { return ExchangePattern::AllgatherSum; }
  bool packs() const override { return true; }
};

using SparsifierPtr = std::unique_ptr<Sparsifier>;

}  // namespace st
