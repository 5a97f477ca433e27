#include "train/exchange_setup.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "core/device.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "core/stream_sync.h"
#include "core/timer.h"
#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/hook_checkpoint.h"
#include "sparsify/registry.h"
#include "train/checkpoint.h"
#include "train/flags.h"

namespace st {

namespace {
const char* kLayoutKey = "hierarchy_layout";
const char* kPlanKey = "exchange_plan";

std::string hierarchy_label() {
  return flag_label(flag_of(&TrainConfig::hierarchy));
}

// The run's bucket exchange: a SparsifyHook around --sparsifier (also returned in
// `sparsify`), or the dense allreduce for --sparsifier none (`sparsify` null).
std::shared_ptr<BucketHook> make_exchange_hook(const TrainConfig& c,
                                               std::shared_ptr<SparsifyHook>& sparsify) {
  sparsify.reset();
  if (c.sparsifier == "none")
    return std::make_shared<AllreduceHook>(
        parse_precision(c.comm_dtype, flag_label(flag_of(&TrainConfig::comm_dtype)).c_str()));
  SparsifierOptions so;
  so.density = c.density;
  so.seed = c.seed;
  so.params = c.sparsifier_params;
  sparsify =
      std::make_shared<SparsifyHook>(make_sparsifier(c.sparsifier, so), so, c.dense_warmup_iters);
  return sparsify;
}

// A sparsified exchange on a CUDA bucket runs the method's device forms (bulk::Ops); a
// method without them is refused here, at start, in one line, never mid-run.
void check_sparsifier_device(const TrainConfig& c) {
  const bool cuda =
      c.device.rfind("cuda", 0) == 0 || (c.device == "auto" && cuda_device_count() > 0);
  if (c.sparsifier == "none" || !cuda) return;
  ST_CHECK(!sparsifier_uses_sq_grads(c.sparsifier), "--sparsifier ", c.sparsifier,
           " needs per-sample squared-gradient sums, which only the CPU layers compute: train "
           "it with --device cpu (or emu), not ",
           c.device);
  // Without a device the device line comes first (parse_device), as for a dense run.
  ST_CHECK(cuda_device_count() == 0 || bulk::cuda_ops_built(), "--sparsifier ", c.sparsifier,
           " on --device ", c.device,
           ": this build has no CUDA implementation of the sparsifiers' bulk passes "
           "(sparsify/bulk/core_cuda.cu); train with --device cpu or without --sparsifier");
}

// Where the checkpoint records its bucket sizes, the message says them.
std::string bucket_hint(const std::map<std::string, std::string>& meta) {
  auto cap = meta.find("bucket_cap_mb"), first = meta.find("first_bucket_mb");
  if (cap == meta.end() || first == meta.end())
    return "the checkpoint does not record its bucket sizes: resume with the --bucket-cap-mb "
           "and --first-bucket-mb of the run that wrote it";
  return "the checkpoint was written with --bucket-cap-mb " + cap->second + " --first-bucket-mb " +
         first->second + "; resume with those";
}
}  // namespace

// The threshold of the largest bucket; the padding weighted over the buckets (padded over
// filled slots of the iteration's padded gathers); the residual norm over all buckets.
void add_sparsify_metrics(const std::vector<SparsifyStats>& stats, MetricRow& row) {
  // The phase times, each summed over the buckets, in column order.
  static const std::pair<const char*, double SparsifyStats::*> kPhases[] = {
      {"sp_ef_ms", &SparsifyStats::ef_ms},
      {"sp_select_ms", &SparsifyStats::select_ms},
      {"sp_partition_ms", &SparsifyStats::partition_ms},
      {"sp_estimate_ms", &SparsifyStats::estimate_ms},
      {"sp_pack_ms", &SparsifyStats::pack_ms},
      {"sp_comm_ms", &SparsifyStats::comm_ms},
      {"sp_decode_ms", &SparsifyStats::decode_ms},
      {"sp_update_ms", &SparsifyStats::update_ms},
      {"sp_exchange_ms", &SparsifyStats::exchange_ms},
      {"sp_total_ms", &SparsifyStats::total_ms}};
  int64_t n = 0, k = 0, local = 0, global = 0, bytes = 0, largest = 0, padded = 0, filled = 0;
  double threshold = 0, residual_sq = 0;
  double phase[std::size(kPhases)] = {};
  int64_t domain = 0;
  for (const SparsifyStats& s : stats) {
    n += s.n;
    domain += s.domain > 0 ? s.domain : s.n;
    k += s.k;
    local += s.local_count;
    global += s.global_count;
    bytes += s.bytes_sent;
    padded += s.padded_slots;
    filled += s.counted_slots;
    residual_sq += s.residual_norm * s.residual_norm;
    for (size_t p = 0; p < std::size(kPhases); ++p) phase[p] += s.*kPhases[p].second;
    if (s.n > largest) {
      largest = s.n;
      threshold = s.threshold;
    }
  }
  row.push_back({"sp_k", k});
  row.push_back({"sp_local", local});
  row.push_back({"sp_global", global});
  row.push_back({"sp_density", domain ? static_cast<double>(global) / domain : 0.0});
  row.push_back({"sp_threshold", threshold});
  row.push_back({"sp_padding", filled ? static_cast<double>(padded) / filled - 1.0 : 0.0});
  for (size_t p = 0; p < std::size(kPhases); ++p) row.push_back({kPhases[p].first, phase[p]});
  row.push_back({"sp_residual_norm", std::sqrt(residual_sq)});
  row.push_back({"sp_bytes", bytes});
}

int parse_hierarchy(const std::string& value) {
  if (value == "off") return -1;
  if (value == "node") return 0;
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  ST_CHECK(!value.empty() && *end == '\0' && n >= 1 && n <= 1 << 20, hierarchy_label(), " '", value,
           "' is none of off, node, or a number of ranks per node");
  return static_cast<int>(n);
}

namespace {

// The refusals that need the stack's own reading of the flags (`sparsify`: the innermost
// hook as --sparsifier and --sp made it, null for none).
void check_stack(const TrainConfig& c, const SparsifyHook* sparsify) {
  const bool two_level = parse_hierarchy(c.hierarchy) >= 0;
  ST_CHECK(c.plan == "off" || c.sparsifier != "none",
           "--plan auto chooses per bucket between the dense allreduce and --sparsifier: pass a "
           "--sparsifier");
  if (!two_level || c.sparsifier == "none") return;
  // A slice of a bucket cuts through its tensors: nothing that needs whole tensors or
  // inputs the size of the bucket can run on it.
  ST_CHECK(!sparsifier_uses_sq_grads(c.sparsifier), hierarchy_label(), " ", c.hierarchy,
           ": --sparsifier ", c.sparsifier,
           " reads per-sample squared gradients of the whole bucket, which a rank's slice does "
           "not have; use it flat (--hierarchy off)");
  // --sp scope as the hook's own parser read it (a word or its number).
  ST_CHECK(!sparsify || sparsify->scope() != SelectScope::Tensor, hierarchy_label(), " ",
           c.hierarchy,
           ": --sp scope=tensor selects per tensor, but a rank's slice of a bucket "
           "cuts through tensors; use scope=bucket or --hierarchy off");
}

}  // namespace

void check_exchange_flags(const TrainConfig& c) {
  check_sparsifier_device(c);
  // --sp keys and values as the exchange hook reads them, before any data is loaded.
  std::shared_ptr<SparsifyHook> sparsify;
  make_exchange_hook(c, sparsify);
  check_stack(c, sparsify.get());
}

std::string sparsifier_flag_text() {
  return sparsifier_flag_help();
}

ExchangeSetup::ExchangeSetup(const TrainConfig& c, Communicator& comm) : c_(c), comm_(comm) {
  check_sparsifier_device(c);
  std::shared_ptr<BucketHook> hook = make_exchange_hook(c, sparsify_);
  check_stack(c, sparsify_.get());
  if (c.plan == "auto") {
    planned_ = std::make_shared<PlannedHook>(std::make_shared<AllreduceHook>(), hook);
    hook = planned_;
  }
  const int per_node = parse_hierarchy(c.hierarchy);
  if (per_node >= 0) {
    hierarchy_ = std::make_shared<HierarchicalHook>(hook, comm, find_node_layout(comm, per_node));
    hook = hierarchy_;
  }
  outer_ = hook;
}

ExchangeSetup::~ExchangeSetup() = default;

void ExchangeSetup::attach_side_inputs(FlatParams& flat) {
  if (!sparsify_ || !sparsifier_uses_sq_grads(c_.sparsifier)) return;
  // Variance-based compression needs per-sample squared-gradient sums for every weight
  // matrix; vectors (biases, BatchNorm scales) may use VGC's documented g^2 / B bound. A
  // model whose matrices lack them (the LSTM, the embedding) is refused here, at start,
  // rather than silently trained on the bound.
  for (Param* p : flat.params())
    ST_CHECK(p->provides_sq_grad || p->value.rank() < 2, "--sparsifier ", c_.sparsifier,
             " needs per-sample squared gradients, which parameter '", p->name, "' ",
             p->value.shape().str(),
             " does not provide (only Linear, Conv2d and Embedding layers do)");
  sq_grads_ = std::make_unique<SqGradients>(flat, c_.batch_size * c_.accum_steps);
  sparsify_->set_aux_provider(sq_grads_->provider());
}

void ExchangeSetup::zero_side_inputs() {
  if (sq_grads_) sq_grads_->zero();
}

void ExchangeSetup::add_statistics(MetricRow& row) {
  if (sparsify_) add_sparsify_metrics(sparsify_->take_stats(), row);
}

void ExchangeSetup::add_checkpoint_state(std::vector<std::pair<std::string, Tensor>>& extra) const {
  if (!sparsify_) return;
  for (auto& entry : gather_sparsify_state(*sparsify_, comm_)) extra.push_back(std::move(entry));
}

void ExchangeSetup::resume(int64_t step, Reducer& reducer,
                           const std::map<std::string, std::string>& saved, Device device,
                           bool quiet) {
  reducer.set_iteration(step);
  if (sparsify_) {
    std::map<std::string, std::string> meta;
    if (restore_sparsify_state(*sparsify_, c_.resume, comm_, &meta))
      sparsify_->check_bucket_plan(sparsified(reducer.buckets()), bucket_hint(meta));
    else if (comm_.rank() == 0)
      std::fprintf(stderr, "note: %s has no sparsifier state; --sparsifier %s starts fresh\n",
                   c_.resume.c_str(), c_.sparsifier.c_str());
  }
  make_plan(reducer.buckets(), &saved, device, quiet);
}

std::vector<Bucket> ExchangeSetup::sparsified(const std::vector<Bucket>& buckets) const {
  return hierarchy_ ? hierarchy_->slices_of(buckets) : buckets;
}

namespace {
// The fastest of timed exchanges of `hook` on a random bucket of n elements after two
// untimed ones (the minimum: what the link and the method can do, least disturbed by
// other processes on the machine), the slowest rank's: every rank then holds the same.
double time_exchange(BucketHook& hook, int id, int64_t n, Communicator& comm, Device device,
                     int64_t first_iteration) {
  constexpr int kWarmup = 2, kTimed = 7;
  Rng rng(0x9e3779b97f4a7c15ull + static_cast<uint64_t>(comm.rank()));
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = 1e-3f * rng.normal();
  const Tensor src = Tensor::from_vector(values, {n}).to(device);
  Tensor g = Tensor::empty({n}, DType::F32, device);
  Bucket bucket;
  bucket.id = id;
  bucket.numel = n;
  std::vector<double> ms;
  for (int i = 0; i < kWarmup + kTimed; ++i) {
    g.copy_from(src);
    synchronize_current_stream(device);
    comm.barrier();
    Timer t;
    hook.exchange(bucket, g, comm, first_iteration + i);
    if (i >= kWarmup) ms.push_back(t.ms());
  }
  return comm.allreduce_scalar(*std::min_element(ms.begin(), ms.end()), ReduceOp::Max);
}

LinearCost fit_exchange(BucketHook& hook, int64_t lo, int64_t hi, Communicator& comm, Device device,
                        int64_t first_iteration) {
  const double at_lo = time_exchange(hook, 0, lo, comm, device, first_iteration);
  const double at_hi = time_exchange(hook, 1, hi, comm, device, first_iteration);
  // Noise can tilt a line through two points below zero; a cost never falls with size.
  LinearCost line = LinearCost::through(lo, at_lo, hi, at_hi);
  if (line.ms_per_element < 0) line = {std::max(at_lo, at_hi), 0.0};
  if (line.fixed_ms < 0) line = {0.0, at_hi / static_cast<double>(hi)};
  return line;
}

// The method's own cost per element in the probe's larger bucket: error feedback and
// selection, the part of compressed(n) that is not the link's.
double selection_ns_per_element(SparsifyHook& probe, int64_t n, Communicator& comm) {
  std::vector<double> ns;
  for (const SparsifyStats& s : probe.take_stats())
    if (s.n == n) ns.push_back((s.ef_ms + s.select_ms) * 1e6 / static_cast<double>(n));
  std::sort(ns.begin(), ns.end());
  return comm.allreduce_scalar(ns.empty() ? 0.0 : ns[ns.size() / 2], ReduceOp::Max);
}

std::string describe_line(const char* what, const LinearCost& c) {
  char line[160];
  std::snprintf(line, sizeof line, "%s %.3f ms + %.3f ns/element", what, c.fixed_ms,
                c.ms_per_element * 1e6);
  return line;
}
}  // namespace

Communicator& ExchangeSetup::slow_group() {
  return hierarchy_ && hierarchy_->two_level() ? *hierarchy_->cross_group() : comm_;
}

int ExchangeSetup::slice_parts() const {
  return hierarchy_ && hierarchy_->two_level() ? hierarchy_->layout().local_size : 1;
}

void ExchangeSetup::probe(int64_t largest, Device device) {
  // Probe sizes: the largest slice capped at kProbeMax elements (a few seconds of a slow
  // link at most; the lines extend beyond it) and an eighth of it, so the two points set
  // a slope.
  constexpr int64_t kProbeMax = int64_t{1} << 18;
  const int64_t hi = std::clamp<int64_t>(largest, 16, kProbeMax), lo = hi / 8;
  Communicator& group = slow_group();
  AllreduceHook dense;
  std::shared_ptr<SparsifyHook> method;
  make_exchange_hook(c_, method);
  const int64_t first = c_.dense_warmup_iters;  // past the warm-up: the method selects
  model_.dense = fit_exchange(dense, lo, hi, group, device, first);
  model_.compressed = fit_exchange(*method, lo, hi, group, device, first);
  probed_ = true;
  const double select_ns = selection_ns_per_element(*method, hi, group);
  probe_text_ = "plan: over " + std::to_string(group.size()) + " ranks " +
                describe_line("allreduce", model_.dense) + "; " +
                describe_line(c_.sparsifier.c_str(), model_.compressed);
  char select[64];
  std::snprintf(select, sizeof select, " (selection %.3f ns/element)", select_ns);
  probe_text_ += select;
  if (hierarchy_ && hierarchy_->two_level()) {
    const LinearCost node = fit_exchange(dense, lo, hi, *hierarchy_->node_group(), device, first);
    probe_text_ += "; inside a node " + describe_line("allreduce", node);
  }
}

double ExchangeSetup::bucket_cap_mb(const std::vector<int64_t>& ready_numels,
                                    const ReducerOptions& options, Device device, bool quiet) {
  if (!planned_) return options.bucket_cap_mb;
  if (!c_.resume.empty()) {
    // A resumed plan belongs to the buckets of the run that chose it.
    const auto saved = load_safetensors_metadata(c_.resume);
    if (saved.count(kPlanKey)) return meta_double(saved, "bucket_cap_mb", c_.resume);
  }
  int64_t total = 0;
  for (const int64_t n : ready_numels) total += n;
  probe(total / slice_parts(), device);
  const BucketCapChoice pick =
      choose_bucket_cap(model_, ready_numels, options.first_bucket_mb, slice_parts());
  // Decided on rank 0 (every rank holds the same figures; the broadcast makes it certain).
  Tensor cap = Tensor::full({1}, static_cast<float>(pick.cap_mb));
  comm_.broadcast(cap, 0);
  if (comm_.rank() == 0 && !quiet)
    std::fprintf(stderr,
                 "plan: bucket cap %g MB (%zu buckets; fixed costs at most %.0f%% of a "
                 "bucket's exchange after the first)\n",
                 cap.data<float>()[0], pick.buckets, 100 * pick.worst_fixed_share);
  return cap.data<float>()[0];
}

void ExchangeSetup::make_plan(const std::vector<Bucket>& buckets,
                              const std::map<std::string, std::string>* resumed, Device device,
                              bool quiet) {
  if (!planned_) return;
  const bool leader = comm_.rank() == 0;
  if (resumed && resumed->count(kPlanKey)) {
    planned_->set_plan(decode_plan(resumed->at(kPlanKey), buckets.size(), c_.resume));
    if (leader && !quiet)
      std::fprintf(stderr, "plan: kept from %s: %s\n", c_.resume.c_str(),
                   encode_plan(planned_->plan()).c_str());
    return;
  }
  if (resumed && leader)
    std::fprintf(stderr,
                 "note: %s holds no exchange plan (metadata '%s'): the link is probed again and "
                 "the plan chosen anew\n",
                 c_.resume.c_str(), kPlanKey);
  const std::vector<Bucket> slices = sparsified(buckets);
  if (!probed_) {
    int64_t largest = 0;
    for (const Bucket& b : slices) largest = std::max(largest, b.numel);
    probe(largest, device);
  }
  std::vector<PlanRow> rows = choose_plan(model_, slices);
  Tensor choice = Tensor::zeros({static_cast<int64_t>(rows.size())}, DType::I32);
  for (size_t i = 0; i < rows.size(); ++i)
    choice.data<int32_t>()[i] = rows[i].choice == BucketChoice::Compressed;
  comm_.broadcast(choice, 0);  // as the bucket cap: rank 0's decision on every rank
  std::vector<BucketChoice> choices;
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].choice = choice.data<int32_t>()[i] ? BucketChoice::Compressed : BucketChoice::Dense;
    choices.push_back(rows[i].choice);
  }
  planned_->set_plan(choices);
  if (leader && !quiet)
    std::fprintf(stderr, "%s\n%s", probe_text_.c_str(), describe_plan(rows).c_str());
}

void ExchangeSetup::add_metadata(std::map<std::string, std::string>& meta) const {
  if (hierarchy_) meta[kLayoutKey] = hierarchy_->layout().describe();
  if (planned_ && !planned_->plan().empty()) meta[kPlanKey] = encode_plan(planned_->plan());
}

void ExchangeSetup::check_resume(const std::map<std::string, std::string>& saved,
                                 const std::string& path) const {
  if (auto it = saved.find("sparsifier"); it != saved.end() && it->second != "none") {
    const std::vector<std::string> names = sparsifier_names();
    ST_CHECK(std::find(names.begin(), names.end(), it->second) != names.end(), path,
             ": checkpoint metadata 'sparsifier' is '", it->second,
             "', which this build does not know");
  }
  auto it = saved.find(kLayoutKey);
  const std::string now = hierarchy_ ? hierarchy_->layout().describe() : "";
  if (it == saved.end() || now.empty()) return;  // the --hierarchy flag check covers the rest
  // On one node the method ran flat, and a flat state re-splits for another world size.
  const auto one_node = [](const std::string& layout) { return layout.rfind("1 node x", 0) == 0; };
  ST_CHECK(it->second == now || (one_node(it->second) && one_node(now)), path,
           ": its two-level exchange ran on ", it->second,
           " and each rank's residuals belong to its slice there; this run has ", now,
           ": resume on the same layout");
}

}  // namespace st
