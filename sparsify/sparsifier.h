// Sparsifier: the selection rule of a gradient-compression method (ALGORITHMS.md). The
// SparsifyHook around it does everything the methods share: error feedback, the
// exchange pattern, writing the averaged result back into the bucket, statistics.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace st {

// How selections travel (ALGORITHMS.md, "Two exchange patterns", plus two special cases).
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
};
const char* pattern_name(ExchangePattern p);

// What a sparsifier sees for one bucket at one iteration.
struct SelectContext {
  int bucket = 0;
  int64_t iteration = 0;  // t, counted from the first sparsified iteration
  int rank = 0;
  int world = 1;
  double density = 0.01;  // d
  int64_t k = 0;          // floor(d * n), at least 1
  uint64_t seed = 0;
};

// A rank's selection: positions in the bucket and the values it contributes there.
// For UnionAllreduce / SharedIndices / LeaderIndices only `indices` matter (the hook
// reads x); for AllgatherSum `values` are what is sent (possibly quantised) and the
// residual keeps x - value.
struct Selection {
  std::vector<int32_t> indices;
  std::vector<float> values;
  double threshold = 0.0;  // the threshold the rule used, for statistics (0 = none)
  void clear() {
    indices.clear();
    values.clear();
    threshold = 0.0;
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
};

// Options from the command line: --density, --seed and --sp key=value pairs.
struct SparsifierOptions {
  double density = 0.01;
  uint64_t seed = 0;
  std::map<std::string, std::string> params;
  // Typed access with a default; an unparsable value throws naming the key.
  double get(const std::string& key, double fallback) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  // Throws listing the allowed keys when params holds any other key.
  void check_keys(const std::string& method, const std::vector<std::string>& allowed) const;
};

class Sparsifier {
 public:
  virtual ~Sparsifier() = default;
  virtual std::string name() const = 0;
  virtual ExchangePattern pattern() const = 0;
  // Does the rule promise at least one element per rank and bucket (MiCRO, Top-k)?
  virtual bool sends_at_least_one() const { return true; }
  // Selects on x (gradient plus residual) of one bucket. For LeaderIndices only the
  // leader's selection is used; the others may leave `out` empty.
  virtual void select(const SelectContext& ctx, const float* x, int64_t n, Selection& out) = 0;
  // Called on every rank after each exchange, with the same feedback everywhere.
  virtual void observe(const ExchangeFeedback&) {}
  // A number that must agree across ranks when the rule's state does (thresholds,
  // partitions); the conformance suite compares it. 0 = stateless.
  virtual double state_signature(int /*bucket*/) const { return 0.0; }
};

using SparsifierPtr = std::unique_ptr<Sparsifier>;

}  // namespace st
