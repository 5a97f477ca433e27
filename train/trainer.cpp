#include "train/trainer.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "comm/reducer.h"
#include "core/parallel.h"
#include "core/safetensors.h"
#include "core/timer.h"
#include "data/loader.h"
#include "data/registry.h"
#include "layers/flat_params.h"
#include "layers/softmax_cross_entropy.h"
#include "models/registry.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "sparsify/sparsify_hook.h"
#include "sparsify/vgc.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/trace.h"
#include "train/train_common.h"

namespace st {

namespace {

// Debian's dataset-fashion-mnist package installs the files here.
const char* kDebianFashionMnist = "/usr/share/datasets/fashion-mnist";

DatasetSpec dataset_spec(const TrainConfig& c, bool train, const ArchInfo& arch) {
  DatasetSpec s;
  s.name = c.dataset;
  s.dir = c.data_dir;
  if (s.dir.empty() && c.dataset == "fashion-mnist") s.dir = kDebianFashionMnist;
  ST_CHECK(!s.dir.empty() || c.dataset == "synthetic", "--data-dir is required for --dataset ",
           c.dataset, " (or use --dataset synthetic)");
  s.train = train;
  s.augment = c.augment;
  s.image_size = c.image_size > 0 ? c.image_size : static_cast<int>(arch.image_size);
  // Synthetic data takes the model's natural input shape (1 channel for MNIST-sized nets).
  const int64_t side = s.image_size;
  s.shape = Shape{side == 28 ? 1 : 3, side, side};
  s.size = c.synthetic_size > 0
               ? (train ? c.synthetic_size : std::max<int64_t>(c.synthetic_size / 5, 1))
               : 0;
  s.seed = c.seed;  // same class patterns in both splits (examples never repeat)
  return s;
}

// The first `n` examples of another dataset (smoke tests, quick experiments).
class SubsetDataset : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<Dataset> base, int64_t n) : base_(std::move(base)), n_(n) {
    ST_CHECK(n > 0, "subset size must be positive, got ", n);
    n_ = std::min(n_, base_->size());
  }
  std::string name() const override {
    return base_->name() + " [first " + std::to_string(n_) + "]";
  }
  int64_t size() const override { return n_; }
  int num_classes() const override { return base_->num_classes(); }
  Shape example_shape() const override { return base_->example_shape(); }
  int32_t get_into(int64_t index, SampleRng& rng, float* out) const override {
    check_index(index);
    return base_->get_into(index, rng, out);
  }

 private:
  std::shared_ptr<Dataset> base_;
  int64_t n_;
};

std::shared_ptr<Dataset> maybe_subset(std::shared_ptr<Dataset> d, int64_t n) {
  return n > 0 ? std::make_shared<SubsetDataset>(std::move(d), n) : d;
}

struct Setup {
  std::shared_ptr<Dataset> train_set, test_set;
  LayerPtr model;
  Device device;
};

Setup build(const TrainConfig& c, bool need_train) {
  ST_CHECK(c.batch_size > 0, "-b/--batch-size must be positive, got ", c.batch_size);
  ST_CHECK(c.epochs > 0, "--epochs must be positive, got ", c.epochs);
  set_num_threads(c.threads);
  const ArchInfo& arch = arch_info(c.arch);  // unknown --arch lists the valid ones
  Setup s;
  s.device = parse_device(c.device);
  if (need_train)
    s.train_set = maybe_subset(open_dataset(dataset_spec(c, true, arch)), c.train_subset);
  s.test_set = maybe_subset(open_dataset(dataset_spec(c, false, arch)), c.test_subset);
  const Dataset& ref = need_train ? *s.train_set : *s.test_set;
  const Shape shape = ref.example_shape();
  Rng rng(c.seed);
  s.model = make_model(c.arch, ref.num_classes(), shape[0], rng, shape[1]);
  s.model->to(s.device);
  return s;
}

EvalResult evaluate(Layer& model, DataLoader& loader, Device device, int64_t max_batches,
                    Communicator& comm) {
  model.set_training(false);
  SoftmaxCrossEntropy ce;
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0, batches = 0;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    const int64_t n = batch->labels.numel();
    Tensor logits = model.forward(batch->images.to(device));
    loss_sum += static_cast<double>(ce.forward(logits, batch->labels.to(device))) * n;
    correct += ce.correct();
    r.examples += n;
    if (max_batches > 0 && ++batches >= max_batches) break;
  }
  model.set_training(true);
  // Each rank evaluated its shard of the test split; sum over ranks.
  loss_sum = comm.allreduce_scalar(loss_sum);
  correct = static_cast<int64_t>(comm.allreduce_scalar(static_cast<double>(correct)) + 0.5);
  r.examples = static_cast<int64_t>(comm.allreduce_scalar(static_cast<double>(r.examples)) + 0.5);
  ST_CHECK(r.examples > 0, "evaluation: the test split is empty");
  r.loss = loss_sum / r.examples;
  r.accuracy = 100.0 * correct / r.examples;
  return r;
}

DataLoader make_loader(const std::shared_ptr<Dataset>& ds, const TrainConfig& c, bool shuffle,
                       const Communicator& comm) {
  SamplerOptions so;
  so.rank = comm.rank();
  so.world_size = comm.size();
  so.seed = c.seed;
  so.shuffle = shuffle;
  LoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.workers = c.workers;
  lo.seed = c.seed;
  return DataLoader(ds, DistributedSampler(ds->size(), so), lo);
}

std::map<std::string, std::string> run_metadata(const TrainConfig& c) {
  return {{"arch", c.arch},
          {"sparsifier", c.sparsifier},
          {"density", std::to_string(c.density)},
          {"sp", format_sparsifier_params(c.sparsifier_params)},
          {"dataset", c.dataset},
          {"seed", std::to_string(c.seed)},
          {"lr", std::to_string(c.lr)},
          {"batch_size", std::to_string(c.batch_size)},
          {"epochs", std::to_string(c.epochs)}};
}

}  // namespace

TrainResult train(const TrainConfig& c) {
  std::unique_ptr<Communicator> comm = make_communicator(c.comm);
  return train(c, *comm);
}

TrainResult train(const TrainConfig& c, Communicator& comm_ref) {
  Communicator* comm = &comm_ref;
  const int rank = comm->rank(), world = comm->size();
  const bool leader = rank == 0;
  Setup s = build(c, true);
  Layer& model = *s.model;
  FlatParams flat(model, s.device);
  broadcast_model(model, flat, *comm);
  ReducerOptions ro;
  ro.bucket_cap_mb = c.bucket_cap_mb;
  ro.first_bucket_mb = c.first_bucket_mb;
  ro.defer_until_finalize = !c.overlap;
  std::shared_ptr<SparsifyHook> sparsify;
  std::shared_ptr<BucketHook> hook = make_exchange_hook(c, sparsify);
  // Variance-based compression reads per-sample squared-gradient sums from the layers.
  std::unique_ptr<SqGradients> sq_grads;
  if (sparsify && sparsify->sparsifier().uses_sq_grads()) {
    sq_grads = std::make_unique<SqGradients>(flat, c.batch_size);
    sparsify->set_aux_provider(sq_grads->provider());
  }
  Reducer reducer(flat, *comm, hook, ro);
  SgdOptions so;
  so.lr = c.lr;
  so.momentum = c.momentum;
  so.weight_decay = c.weight_decay;
  so.nesterov = c.nesterov;
  so.no_decay_on_norm_and_bias = c.no_wd_on_bn;
  Sgd sgd(flat.params(), so);
  const LrSchedule schedule = parse_lr_schedule(c.schedule, c.lr, c.epochs, c.warmup_epochs);

  if (leader) std::filesystem::create_directories(c.out);
  const std::string ckpt_path = (std::filesystem::path(c.out) / "checkpoint.safetensors").string();
  TrainPosition pos;
  if (!c.resume.empty()) {
    pos = load_checkpoint(c.resume, model, &sgd);
    resume_exchange(c, pos.step, reducer, sparsify.get(), *comm);
    if (!c.quiet && leader)
      std::fprintf(stderr, "resumed from %s at epoch %ld batch %ld (step %ld)\n", c.resume.c_str(),
                   static_cast<long>(pos.epoch), static_cast<long>(pos.batch),
                   static_cast<long>(pos.step));
  }
  const MetricsFormat fmt = parse_metrics_format(c.metrics_format);
  const std::string ext = fmt == MetricsFormat::Csv ? ".csv" : ".jsonl";
  const bool append = !c.resume.empty();
  // Only rank 0 writes logs, the configuration and checkpoints.
  MetricsWriter iter_log, epoch_log;
  if (leader) {
    iter_log =
        MetricsWriter((std::filesystem::path(c.out) / ("iterations" + ext)).string(), fmt, append);
    epoch_log =
        MetricsWriter((std::filesystem::path(c.out) / ("epochs" + ext)).string(), fmt, append);
    nlohmann::json cfg = run_metadata(c);
    std::FILE* f = std::fopen((std::filesystem::path(c.out) / "config.json").c_str(), "w");
    if (f) {
      std::fputs(cfg.dump(2).c_str(), f);
      std::fclose(f);
    }
  }

  DataLoader train_loader = make_loader(s.train_set, c, true, *comm);
  DataLoader test_loader = make_loader(s.test_set, c, false, *comm);
  const int64_t iters_per_epoch = train_loader.batches_per_epoch();
  const int64_t total_steps =
      std::min<int64_t>(c.max_iters > 0 ? c.max_iters : INT64_MAX, iters_per_epoch * c.epochs);
  SoftmaxCrossEntropy ce;
  TrainResult result;
  result.steps = pos.step;
  Timer wall;
  double step_seconds = 0;  // exponential average for the ETA
  const auto meta = run_metadata(c);
  // Every rank joins the sparsifier-state gather; rank 0 writes.
  auto checkpoint = [&](const TrainPosition& at) {
    std::vector<std::pair<std::string, Tensor>> extra;
    if (sparsify) extra = gather_sparsify_state(*sparsify, *comm);
    if (leader) save_checkpoint(ckpt_path, model, &sgd, at, meta, extra);
  };
  const int64_t start_step = pos.step;
  const bool tty = isatty(STDERR_FILENO);
  const bool quiet = c.quiet || !leader;
  // Trace: iterations [5, 5 + trace_iters) of this run, per-layer backward spans included.
  TraceWriter trace(rank);
  const int64_t trace_begin = start_step + 5, trace_end = trace_begin + c.trace_iters;
  bool tracing = false;
  if (!c.trace.empty()) trace_layer_backward(model, trace, tracing);

  for (int64_t epoch = pos.epoch; epoch < c.epochs; ++epoch) {
    train_loader.start_epoch(epoch, epoch == pos.epoch ? pos.batch : 0);
    model.set_training(true);
    Timer epoch_timer;
    double loss_sum = 0;
    int64_t seen = 0, correct = 0;
    int64_t b = epoch == pos.epoch ? pos.batch : 0;
    while (true) {
      Timer t_data;
      auto batch = train_loader.next();
      if (!batch) break;
      const double data_ms = t_data.ms();
      const float lr = schedule.lr(epoch, b, iters_per_epoch);
      sgd.set_lr(lr);
      tracing = !c.trace.empty() && result.steps >= trace_begin && result.steps < trace_end;
      const auto t_fwd = TraceWriter::Clock::now();
      Timer t;
      Tensor images = batch->images.to(s.device), labels = batch->labels.to(s.device);
      Tensor logits = model.forward(images);
      const float loss = ce.forward(logits, labels);
      const double fwd_ms = t.ms();
      if (!std::isfinite(loss))
        ST_THROW("loss is ", loss, " at iteration ", result.steps, " (epoch ", epoch, ", batch ", b,
                 "); stopping. The last good checkpoint is ", ckpt_path,
                 " (try a lower --lr or --clip)");
      t.reset();
      flat.zero_grads();
      if (sq_grads) sq_grads->zero();
      const auto t_bwd = TraceWriter::Clock::now();
      reducer.begin_backward();
      model.backward(ce.backward());
      const double bwd_ms = t.ms();
      const auto t_bwd_end = TraceWriter::Clock::now();
      // Exposed communication: what backward did not hide.
      const double comm_ms = reducer.finalize();
      t.reset();
      const auto t_opt = TraceWriter::Clock::now();
      // Clipping after the exchange clips the averaged gradient (PyTorch DDP order).
      if (c.clip > 0) clip_grad_norm(flat.params(), c.clip);
      sgd.step();
      const double opt_ms = t.ms();
      if (tracing) {
        trace.span("forward", "forward", t_fwd, t_bwd);
        trace.span("backward step " + std::to_string(result.steps), "backward", t_bwd, t_bwd_end);
        for (const TimelineSpan& sp : reducer.timeline()) {
          auto at = [&](double ms) {
            return reducer.begin_time() + std::chrono::duration_cast<TraceWriter::Clock::duration>(
                                              std::chrono::duration<double, std::milli>(ms));
          };
          if (sp.end_ms > sp.begin_ms)
            trace.span(sp.name, sp.track, at(sp.begin_ms), at(sp.end_ms));
          else
            trace.instant(sp.name, sp.track, at(sp.begin_ms));
        }
        trace.span("sgd step", "optimizer", t_opt, TraceWriter::Clock::now());
      }
      const int64_t n = labels.numel();
      loss_sum += static_cast<double>(loss) * n;
      correct += ce.correct();
      seen += n;
      ++result.steps;
      ++b;
      const double iter_s = (data_ms + fwd_ms + bwd_ms + comm_ms + opt_ms) / 1e3;
      step_seconds = result.steps - start_step == 1 ? iter_s : 0.9 * step_seconds + 0.1 * iter_s;
      MetricRow row{{"epoch", epoch},
                    {"iter", b - 1},
                    {"step", result.steps},
                    {"loss", static_cast<double>(loss)},
                    {"acc", 100.0 * ce.correct() / n},
                    {"lr", static_cast<double>(lr)},
                    {"images_per_s", n * world / iter_s},
                    {"data_ms", data_ms},
                    {"fwd_ms", fwd_ms},
                    {"bwd_ms", bwd_ms},
                    {"comm_ms", comm_ms},
                    {"opt_ms", opt_ms},
                    {"wall_s", wall.seconds()}};
      if (sparsify) add_sparsify_metrics(sparsify->take_stats(), row);
      iter_log.write(row);
      if (!quiet && (result.steps % c.log_every == 0 || b == iters_per_epoch)) {
        const double eta = step_seconds * static_cast<double>(total_steps - result.steps);
        std::fprintf(stderr,
                     "%sepoch %ld/%ld  iter %ld/%ld  loss %.4f  acc %.1f%%  lr %.4g  %.0f img/s  "
                     "ETA %s%s",
                     tty ? "\r" : "", static_cast<long>(epoch + 1), static_cast<long>(c.epochs),
                     static_cast<long>(b), static_cast<long>(iters_per_epoch), loss_sum / seen,
                     100.0 * correct / seen, lr, n * world / step_seconds,
                     format_duration(eta).c_str(), tty ? "   " : "\n");
      }
      const bool stop = result.steps >= total_steps && b < iters_per_epoch;
      if (stop || (c.checkpoint_every > 0 && result.steps % c.checkpoint_every == 0))
        checkpoint({epoch, b, result.steps});
      if (!c.trace.empty() && leader && result.steps == trace_end) trace.write(c.trace);
      if (stop) {
        result.last_eval = evaluate(model, test_loader, s.device, c.eval_batches, *comm);
        if (!quiet)
          std::fprintf(stderr,
                       "%sstopped at step %ld (--max-iters): test loss %.4f acc %.2f%%; "
                       "checkpoint %s\n",
                       tty ? "\n" : "", static_cast<long>(result.steps), result.last_eval.loss,
                       result.last_eval.accuracy, ckpt_path.c_str());
        model.set_backward_observer(nullptr, "");
        result.seconds = wall.seconds();
        return result;
      }
    }
    result.last_eval = evaluate(model, test_loader, s.device, c.eval_batches, *comm);
    const double epoch_s = epoch_timer.seconds();
    // The epoch's training loss and accuracy over all ranks.
    loss_sum = comm->allreduce_scalar(loss_sum);
    correct = static_cast<int64_t>(comm->allreduce_scalar(static_cast<double>(correct)) + 0.5);
    seen = static_cast<int64_t>(comm->allreduce_scalar(static_cast<double>(seen)) + 0.5);
    epoch_log.write({{"epoch", epoch},
                     {"step", result.steps},
                     {"train_loss", seen ? loss_sum / seen : 0.0},
                     {"train_acc", seen ? 100.0 * correct / seen : 0.0},
                     {"test_loss", result.last_eval.loss},
                     {"test_acc", result.last_eval.accuracy},
                     {"epoch_s", epoch_s},
                     {"wall_s", wall.seconds()},
                     {"peak_rss_mb", peak_rss_mb()}});
    checkpoint({epoch + 1, 0, result.steps});
    if (!quiet)
      std::fprintf(
          stderr,
          "%sepoch %ld done in %s: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%%\n",
          tty ? "\n" : "", static_cast<long>(epoch + 1), format_duration(epoch_s).c_str(),
          seen ? loss_sum / seen : 0.0, seen ? 100.0 * correct / seen : 0.0, result.last_eval.loss,
          result.last_eval.accuracy);
    if (result.steps >= total_steps) break;
  }
  if (!c.trace.empty() && leader && !trace.empty() && result.steps < trace_end)
    trace.write(c.trace);
  model.set_backward_observer(nullptr, "");
  result.seconds = wall.seconds();
  return result;
}

EvalResult evaluate_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                               Communicator& comm_ref) {
  Communicator* comm = &comm_ref;
  std::map<std::string, std::string> meta;
  {
    // Read the architecture from the checkpoint first so the right model is built.
    TensorFile f = load_safetensors(checkpoint);
    meta = f.metadata;
  }
  TrainConfig c = config;
  if (c.arch.empty() && meta.count("arch")) c.arch = meta["arch"];
  ST_CHECK(!c.arch.empty(), checkpoint, ": no architecture recorded; pass --arch");
  Setup s = build(c, false);
  load_checkpoint(checkpoint, *s.model, nullptr);
  DataLoader loader = make_loader(s.test_set, c, false, *comm);
  return evaluate(*s.model, loader, s.device, c.eval_batches, *comm);
}

}  // namespace st
