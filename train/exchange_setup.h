// The run's bucket exchange as --sparsifier, --hierarchy and --plan make it: a stack of
// bucket hooks, outermost first,
//   HierarchicalHook (--hierarchy: dense inside a node, the rest across nodes)
//     PlannedHook    (--plan auto: per bucket, dense allreduce or the sparsifier)
//       SparsifyHook (--sparsifier) / AllreduceHook (none)
// and what config.json and checkpoints record of it: the node layout the error-feedback
// residuals belong to, and the plan, which a resume keeps instead of probing again.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/hierarchical_hook.h"
#include "comm/planned_hook.h"
#include "layers/flat_params.h"
#include "sparsify/sparsify_hook.h"
#include "sparsify/sq_gradients.h"
#include "train/config.h"
#include "train/metrics.h"

namespace st {

// --hierarchy as a number of ranks per node: 0 for "node" (by host name), -1 for "off";
// anything else is a one-line error naming the flag.
int parse_hierarchy(const std::string& value);
// The start-up refusals of --hierarchy and --plan (methods that cannot run on a slice,
// --plan without a sparsifier); check_config calls it.
void check_exchange_flags(const TrainConfig& c);
// The --sparsifier flag's help: every method the registry has (the words' owner).
std::string sparsifier_flag_text();

// One iteration's sp_* columns from its buckets' statistics: counts, bytes and phase times
// summed over the buckets (the metrics log's and sparsetrain_torch's stats()).
void add_sparsify_metrics(const std::vector<SparsifyStats>& stats, MetricRow& row);

class ExchangeSetup {
 public:
  // Collective: --hierarchy splits `comm` into node and cross-node groups.
  ExchangeSetup(const TrainConfig& c, Communicator& comm);

  ~ExchangeSetup();
  std::shared_ptr<BucketHook> hook() const { return outer_; }
  // The sparsifier's hook (statistics, residuals, checkpoints); null for a dense run.
  SparsifyHook* sparsify() const { return sparsify_.get(); }

  // What the loop asks of the stack as a whole (it never reaches past it):
  // The sparsifier's side input, when it reads one: VGC's per-sample squared-gradient
  // sums beside `flat`'s gradients, of --batch-size x --accum-steps examples per rank
  // (refused at start for a model whose matrices lack them). Kept until the setup is
  // gone, which is after the reducer that reads it.
  void attach_side_inputs(FlatParams& flat);
  // Zeroes the side inputs with the gradients.
  void zero_side_inputs();
  // Whether the exchange reports statistics per step (a sparsifier's sp_* columns).
  bool reports_statistics() const { return sparsify_ != nullptr; }
  // The statistics gathered since the last call, as metrics columns.
  void add_statistics(MetricRow& row);
  // Collective: the exchange's state for a checkpoint (every rank's error-feedback
  // residuals and rule state; complete on rank 0, which writes).
  void add_checkpoint_state(std::vector<std::pair<std::string, Tensor>>& extra) const;
  // On --resume, after the checks: the reducer counts on from `step`, the exchange's state
  // comes back from the checkpoint (re-split for another number of ranks, with a note;
  // checked against the buckets it exchanges; a checkpoint without it starts fresh, with
  // a note), and the plan is the checkpoint's (or probed again, with a note).
  void resume(int64_t step, Reducer& reducer, const std::map<std::string, std::string>& saved,
              Device device, bool quiet);
  // The buckets the sparsifier sees on this rank: the reducer's, or their slices under
  // two levels (the residuals' sizes).
  std::vector<Bucket> sparsified(const std::vector<Bucket>& buckets) const;
  // The reducer's --bucket-cap-mb: options.bucket_cap_mb, except under --plan auto, where
  // a probe of the links and the method (collective) fits the plan's cost lines and
  // choose_bucket_cap picks the cap on rank 0, which broadcasts it; a resumed plan keeps
  // its checkpoint's cap. `ready_numels`: the parameters' sizes in ready order.
  double bucket_cap_mb(const std::vector<int64_t>& ready_numels, const ReducerOptions& options,
                       Device device, bool quiet);
  // --plan auto: the plan saved in `resumed` (a checkpoint's metadata), else dense or
  // compressed per bucket from the probe's lines (probing now if bucket_cap_mb did not),
  // decided on rank 0 and broadcast; rank 0 prints the table unless `quiet`. Nothing for
  // --plan off.
  void make_plan(const std::vector<Bucket>& buckets,
                 const std::map<std::string, std::string>* resumed, Device device, bool quiet);
  // hierarchy_layout and exchange_plan for config.json and checkpoints.
  void add_metadata(std::map<std::string, std::string>& meta) const;
  // A checkpoint's method must be one this build has, and its residuals belong to its
  // node layout: another layout is refused.
  void check_resume(const std::map<std::string, std::string>& saved, const std::string& path) const;

 private:
  const TrainConfig& c_;
  Communicator& comm_;
  std::shared_ptr<SparsifyHook> sparsify_;
  std::shared_ptr<PlannedHook> planned_;
  std::shared_ptr<HierarchicalHook> hierarchy_;
  std::shared_ptr<BucketHook> outer_;
  std::unique_ptr<SqGradients> sq_grads_;  // attach_side_inputs
  PlanModel model_;                        // the probe's cost lines
  bool probed_ = false;
  std::string probe_text_;  // the probe's fitted lines, printed with the plan

  // The ranks a bucket crosses the slow link among, and the slices it is cut into there.
  Communicator& slow_group();
  int slice_parts() const;
  // Fits model_ on buckets of up to `largest` elements (collective).
  void probe(int64_t largest, Device device);
};

}  // namespace st
