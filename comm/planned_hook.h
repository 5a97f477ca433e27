// The exchange plan (--plan auto, docs/ALGORITHMS.md "Planner"): each bucket goes dense or
// compressed, whichever a cost model predicts faster. Compression pays where the link is
// slow against the selection's cost; on a small bucket or a fast link the fixed costs of
// selecting and of the extra collectives make a dense allreduce quicker (the per-tensor
// decision of HiPress, SOSP'21, and Espresso, EuroSys'23). The model is two lines in the
// bucket's element count n, fitted at start by a probe on this run's links and method:
//   dense(n)      = alpha_d + beta_d n   (the allreduce: link latency and bandwidth)
//   compressed(n) = alpha_c + beta_c n   (selection per element + the sparse messages)
// and a bucket goes compressed when compressed(n) < kCompressMargin dense(n): compression
// delays part of the gradient (the residual), so it must pay clearly. The choice flips
// once, at n* = (alpha_c - m alpha_d) / (m beta_d - beta_c) with m = kCompressMargin.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/reducer.h"

namespace st {

enum class BucketChoice { Dense, Compressed };

inline constexpr double kCompressMargin = 0.95;

// ms = fixed_ms + ms_per_element * n
struct LinearCost {
  double fixed_ms = 0, ms_per_element = 0;
  double at(int64_t n) const { return fixed_ms + ms_per_element * static_cast<double>(n); }
  // The line through two measured points (n1 != n2).
  static LinearCost through(int64_t n1, double ms1, int64_t n2, double ms2);
};

struct PlanModel {
  LinearCost dense, compressed;
};

// One bucket of the plan: the elements exchanged across the slow link (a two-level
// exchange's slice), the predictions and the choice.
struct PlanRow {
  int bucket = 0;
  int64_t elements = 0;
  double dense_ms = 0, compressed_ms = 0;
  BucketChoice choice = BucketChoice::Dense;
};

// Compressed where the model predicts it faster by the margin.
std::vector<PlanRow> choose_plan(const PlanModel& model, const std::vector<Bucket>& buckets);

// The bucket sizes: --plan auto chooses --bucket-cap-mb among kBucketCapsMb. Smaller
// buckets start exchanging earlier in backward (more of the exchange hidden behind it);
// larger ones pay the fixed cost of an exchange (latency, a sparsifier's extra
// collectives and set-up) fewer times. The choice is the smallest cap at which no bucket
// but the first (--first-bucket-mb, kept small to start early) spends more than
// kFixedShare of its predicted time on that fixed cost, under the choice choose_plan makes
// for it; if no cap gets there, the one with the smallest worst share (the smaller on a
// tie). `ready_numels`: the parameters' sizes in ready order; `parts`: the slices each
// bucket is cut into before it crosses the slow link (L under two levels, else 1).
inline constexpr double kBucketCapsMb[] = {1, 2, 4, 8, 16, 25, 64, 256, 1024};
inline constexpr double kFixedShare = 0.10;
struct BucketCapChoice {
  double cap_mb = 25;
  double worst_fixed_share = 0;  // of the buckets after the first, at that cap
  size_t buckets = 0;
};
BucketCapChoice choose_bucket_cap(const PlanModel& model, const std::vector<int64_t>& ready_numels,
                                  double first_bucket_mb, int parts);
// The plan as a table: bucket, elements, predicted dense ms, predicted compressed ms, choice.
std::string describe_plan(const std::vector<PlanRow>& rows);
// "dense,compressed,..." in bucket order: config.json and the checkpoint hold it.
std::string encode_plan(const std::vector<BucketChoice>& choices);
// Throws naming `what` unless `text` is such a list of `buckets` entries.
std::vector<BucketChoice> decode_plan(const std::string& text, size_t buckets,
                                      const std::string& what);

class PlannedHook : public BucketHook {
 public:
  PlannedHook(std::shared_ptr<BucketHook> dense, std::shared_ptr<BucketHook> compressed);
  std::string name() const override { return compressed_->name(); }
  // Before the first exchange, identical on every rank (decided on rank 0, broadcast).
  void set_plan(std::vector<BucketChoice> choices) { choices_ = std::move(choices); }
  const std::vector<BucketChoice>& plan() const { return choices_; }
  void exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                int64_t iteration) override;

 private:
  std::shared_ptr<BucketHook> dense_, compressed_;
  std::vector<BucketChoice> choices_;
};

}  // namespace st
