#include "comm/planned_hook.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace st {

LinearCost LinearCost::through(int64_t n1, double ms1, int64_t n2, double ms2) {
  ST_CHECK(n1 != n2, "LinearCost: two points at the same size ", n1);
  LinearCost c;
  c.ms_per_element = (ms2 - ms1) / static_cast<double>(n2 - n1);
  c.fixed_ms = ms1 - c.ms_per_element * static_cast<double>(n1);
  return c;
}

std::vector<PlanRow> choose_plan(const PlanModel& model, const std::vector<Bucket>& buckets) {
  std::vector<PlanRow> rows;
  for (const Bucket& b : buckets) {
    PlanRow r;
    r.bucket = b.id;
    r.elements = b.numel;
    r.dense_ms = model.dense.at(b.numel);
    r.compressed_ms = model.compressed.at(b.numel);
    r.choice = r.compressed_ms < kCompressMargin * r.dense_ms ? BucketChoice::Compressed
                                                              : BucketChoice::Dense;
    rows.push_back(r);
  }
  return rows;
}

namespace {
// Bucket sizes (elements) as the Reducer cuts them.
std::vector<int64_t> bucket_numels(const std::vector<int64_t>& ready_numels,
                                   const ReducerOptions& opt) {
  const std::vector<int> cut = cut_buckets(ready_numels, opt);
  std::vector<int64_t> numels;
  for (size_t i = 0; i < cut.size(); ++i) {
    if (numels.size() <= static_cast<size_t>(cut[i])) numels.push_back(0);
    numels.back() += ready_numels[i];
  }
  return numels;
}

// The largest share of predicted time that a bucket after the first spends on the fixed
// cost of its planned exchange (each bucket as `parts` slices).
double worst_fixed_share(const PlanModel& model, const std::vector<int64_t>& numels, int parts) {
  double worst = 0;
  for (size_t b = 1; b < numels.size(); ++b) {
    Bucket slice;
    slice.numel = std::max<int64_t>(numels[b] / parts, 1);
    const PlanRow row = choose_plan(model, {slice}).front();
    const LinearCost& line = row.choice == BucketChoice::Dense ? model.dense : model.compressed;
    const double total = line.at(slice.numel);
    if (total > 0) worst = std::max(worst, line.fixed_ms / total);
  }
  return worst;
}
}  // namespace

BucketCapChoice choose_bucket_cap(const PlanModel& model, const std::vector<int64_t>& ready_numels,
                                  double first_bucket_mb, int parts) {
  ST_CHECK(parts >= 1, "choose_bucket_cap: ", parts, " slices per bucket");
  BucketCapChoice best;
  bool have = false;
  for (const double cap : kBucketCapsMb) {
    ReducerOptions opt;
    opt.first_bucket_mb = first_bucket_mb;
    opt.bucket_cap_mb = cap;
    const std::vector<int64_t> numels = bucket_numels(ready_numels, opt);
    const double share = worst_fixed_share(model, numels, parts);
    if (!have || share < best.worst_fixed_share) {
      best = {cap, share, numels.size()};
      have = true;
    }
    if (share <= kFixedShare) return {cap, share, numels.size()};
  }
  return best;
}

namespace {
const char* choice_name(BucketChoice c) {
  return c == BucketChoice::Dense ? "dense" : "compressed";
}
}  // namespace

std::string describe_plan(const std::vector<PlanRow>& rows) {
  std::string out = "bucket   elements  dense_ms  compressed_ms  choice\n";
  char line[128];
  for (const PlanRow& r : rows) {
    std::snprintf(line, sizeof line, "%6d %10lld %9.3f %14.3f  %s\n", r.bucket,
                  static_cast<long long>(r.elements), r.dense_ms, r.compressed_ms,
                  choice_name(r.choice));
    out += line;
  }
  return out;
}

std::string encode_plan(const std::vector<BucketChoice>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += ',';
    out += choice_name(choices[i]);
  }
  return out;
}

std::vector<BucketChoice> decode_plan(const std::string& text, size_t buckets,
                                      const std::string& what) {
  std::vector<BucketChoice> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    ST_CHECK(item == "dense" || item == "compressed", what, ": exchange plan entry '", item,
             "' is neither dense nor compressed");
    out.push_back(item == "dense" ? BucketChoice::Dense : BucketChoice::Compressed);
  }
  ST_CHECK(out.size() == buckets, what, ": the exchange plan has ", out.size(),
           " buckets, this run has ", buckets,
           " (resume with the bucket sizes of the run that "
           "wrote it)");
  return out;
}

PlannedHook::PlannedHook(std::shared_ptr<BucketHook> dense, std::shared_ptr<BucketHook> compressed)
    : dense_(std::move(dense)), compressed_(std::move(compressed)) {
  ST_CHECK(dense_ && compressed_, "PlannedHook: both a dense and a compressed hook are needed");
}

void PlannedHook::exchange(const Bucket& bucket, Tensor& grads, Communicator& comm,
                           int64_t iteration) {
  ST_CHECK(bucket.id >= 0 && static_cast<size_t>(bucket.id) < choices_.size(),
           "--plan auto: no plan for bucket ", bucket.id, " (", choices_.size(), " planned)");
  BucketHook& hook =
      choices_[static_cast<size_t>(bucket.id)] == BucketChoice::Dense ? *dense_ : *compressed_;
  hook.exchange(bucket, grads, comm, iteration);
}

}  // namespace st
