#include "train/trainer.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>

#include "comm/communicator.h"
#include "core/parallel.h"
#include "core/safetensors.h"
#include "core/word_list.h"
#include "data/device_prefetch.h"
#include "data/loader.h"
#include "data/registry.h"
#include "layers/batchnorm2d.h"
#include "layers/dropout.h"
#include "layers/softmax_cross_entropy.h"
#include "models/registry.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint.h"
#include "train/flags.h"
#include "train/run_folder.h"
#include "train/training_loop.h"

namespace st {

namespace {

DatasetSpec dataset_spec(const TrainConfig& c, bool train, const ArchInfo& arch) {
  DatasetSpec s;
  s.name = c.dataset;
  s.dir = c.data_dir;
  if (s.dir.empty() && c.dataset == "fashion-mnist") s.dir = kDebianFashionMnistDir;
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

Setup build(const TrainConfig& c, bool need_train, const NodePlacement& placement) {
  set_num_threads(c.threads);
  note_node_share(placement.local_size);
  const ArchInfo& arch = arch_info(c.arch);  // unknown --arch lists the valid ones
  Setup s;
  s.device = parse_device(c.device, placement);
  set_process_device(s.device);
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

// Each rank evaluates its shard of the test split. The sampler pads the shards to equal
// length by repeating the head of the split; only a shard's first `real` examples are
// counted, so the sum over ranks counts every example once, as one process would.
EvalResult evaluate(Layer& model, DevicePrefetcher& input, int64_t max_batches, Communicator& comm,
                    int64_t real) {
  model.set_training(false);
  SoftmaxCrossEntropy ce;
  EvalResult r;
  double loss_sum = 0;
  int64_t correct = 0, batches = 0;
  input.start_epoch(0);
  while (auto batch = input.next()) {
    const int64_t n = std::min(batch->labels.numel(), real - r.examples);
    Tensor logits = model.forward(batch->images);
    if (n > 0) {
      const int64_t classes = logits.shape()[1];
      const Tensor mine = logits.slice_flat(0, Shape{n, classes});
      loss_sum += static_cast<double>(ce.forward(mine, batch->labels.slice_flat(0, Shape{n}))) * n;
      correct += ce.correct();
      r.examples += n;
    }
    if (max_batches > 0 && ++batches >= max_batches) break;
  }
  model.set_training(true);
  loss_sum = comm.allreduce_scalar(loss_sum);
  correct = static_cast<int64_t>(comm.allreduce_scalar(static_cast<double>(correct)) + 0.5);
  r.examples = static_cast<int64_t>(comm.allreduce_scalar(static_cast<double>(r.examples)) + 0.5);
  ST_CHECK(r.examples > 0, "evaluation: the test split is empty");
  r.loss = loss_sum / r.examples;
  r.accuracy = 100.0 * correct / r.examples;
  return r;
}

// On a GPU the batches are assembled in page-locked memory for the asynchronous copy.
DataLoader make_loader(const std::shared_ptr<Dataset>& ds, const TrainConfig& c, bool shuffle,
                       const Communicator& comm, Device device) {
  SamplerOptions so;
  so.rank = comm.rank();
  so.world_size = comm.size();
  so.seed = c.seed;
  so.shuffle = shuffle;
  LoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.workers = c.workers;
  lo.seed = c.seed;
  lo.pin_memory = !device.is_cpu();
  return DataLoader(ds, DistributedSampler(ds->size(), so), lo);
}

// Checkpoint metadata: the masks drawn by each Dropout layer, comma-separated.
constexpr const char* kDropoutCallsKey = "dropout_calls";

// Image classification: batches from the sharded loader, softmax cross-entropy,
// accuracy, the test split after every epoch, the --schedule LR policy. On a GPU each
// batch's copy runs on a side stream during the step before it (DevicePrefetcher).
class ImageTask : public TrainingTask {
 public:
  ImageTask(const TrainConfig& c, Communicator& comm)
      : c_(c),
        comm_(comm),
        s_(build(c, true, comm.placement())),
        train_loader_(make_loader(s_.train_set, c, true, comm, s_.device)),
        test_loader_(make_loader(s_.test_set, c, false, comm, s_.device)),
        train_input_(train_loader_, s_.device),
        test_input_(test_loader_, s_.device),
        schedule_(parse_lr_schedule(c.schedule, c.lr, c.epochs, c.warmup_epochs)),
        drop_single_(single_last_batch_breaks_bn(c, comm)) {
    ST_CHECK(steps_per_epoch() > 0, "the training split gives each rank one example, and ", c.arch,
             "'s BatchNorm needs more than one per batch in training (use more data)");
    seed_dropout_for_rank(*s_.model, comm.rank());
  }

  Layer& model() override { return *s_.model; }
  Device device() const override { return s_.device; }
  QualityMetric quality() const override { return QualityMetric::Accuracy; }
  const char* item_name() const override { return "images"; }
  const char* step_name() const override { return "batch"; }
  bool clips_before_exchange() const override { return false; }
  int64_t steps_per_epoch() const override {
    return train_loader_.batches_per_epoch() - (drop_single_ ? 1 : 0);
  }
  Shape example_shape() const override { return s_.train_set->example_shape(); }
  std::string startup_line() const override {
    if (!drop_single_) return "";
    return "note: each epoch's last batch would hold one example per rank, which " + c_.arch +
           "'s BatchNorm cannot normalise in training; it is left out (as drop_last would)";
  }

  void start_epoch(int64_t epoch, int64_t first) override {
    train_input_.start_epoch(epoch, first);
    s_.model->set_training(true);
  }
  bool load_batch() override {
    batch_ = train_input_.next();  // on s_.device
    if (batch_ && drop_single_ && batch_->labels.numel() == 1) batch_.reset();
    return batch_.has_value();
  }
  StepLoss forward_loss() override {
    Tensor logits = s_.model->forward(batch_->images);
    const float loss = ce_.forward(logits, batch_->labels);
    return {loss, static_cast<double>(batch_->labels.numel()), ce_.correct()};
  }
  Tensor loss_grad() override { return ce_.backward(); }

  float lr(int64_t epoch, int64_t b) const override {
    return schedule_.lr(epoch, b, train_loader_.batches_per_epoch());
  }
  Evaluation evaluate(bool) override {
    last_eval_ = st::evaluate(*s_.model, test_input_, c_.eval_batches, comm_,
                              test_loader_.sampler().real_samples());
    char summary[64];
    std::snprintf(summary, sizeof summary, "test loss %.4f acc %.2f%%", last_eval_.loss,
                  last_eval_.accuracy);
    return {{{"test_loss", last_eval_.loss}, {"test_acc", last_eval_.accuracy}},
            summary,
            last_eval_.loss};
  }
  float end_epoch(int64_t epoch, const Evaluation&) override {
    return schedule_.lr(epoch, steps_per_epoch() - 1, steps_per_epoch());
  }
  std::map<std::string, std::string> metadata() const override {
    return flag_metadata(c_, SavedBy::image);
  }
  // The masks the Dropout layers have drawn (Inception-v4's classifier), so that a resumed
  // run goes on with the masks the uninterrupted run would draw. Every rank has drawn as
  // many, so rank 0's counts are every rank's.
  void checkpoint_state(std::vector<std::pair<std::string, Tensor>>&,
                        std::map<std::string, std::string>& meta) override {
    const std::vector<uint64_t> calls = dropout_calls(*s_.model);
    if (calls.empty()) return;
    std::string text;
    for (uint64_t n : calls) {
      if (!text.empty()) text += ',';
      text += std::to_string(n);
    }
    meta[kDropoutCallsKey] = text;
  }
  void restore(const std::string& path, const std::map<std::string, std::string>& saved,
               const TrainPosition&) override {
    const auto it = saved.find(kDropoutCallsKey);
    if (it == saved.end()) return;  // a model without Dropout
    std::vector<uint64_t> calls;
    std::istringstream list(it->second);
    for (std::string n; std::getline(list, n, ',');) {
      // At most 19 digits: every such count fits in 64 bits, so stoull cannot throw.
      ST_CHECK(
          !n.empty() && n.size() <= 19 && n.find_first_not_of("0123456789") == std::string::npos,
          path, ": metadata '", kDropoutCallsKey, "' is not a list of counts: '", it->second, "'");
      calls.push_back(std::stoull(n));
    }
    try {
      set_dropout_calls(*s_.model, calls);
    } catch (const Error& e) {
      ST_THROW(path, ": metadata '", kDropoutCallsKey, "': ", e.what());
    }
  }

  const EvalResult& last_eval() const { return last_eval_; }

 private:
  const TrainConfig& c_;
  Communicator& comm_;
  Setup s_;
  DataLoader train_loader_, test_loader_;
  DevicePrefetcher train_input_, test_input_;
  LrSchedule schedule_;
  SoftmaxCrossEntropy ce_;
  std::optional<Batch> batch_;
  EvalResult last_eval_;
  // BatchNorm in training needs more than one value per channel: a final batch of one
  // example per rank is left out of every epoch (batches of one are otherwise kept).
  bool single_last_batch_breaks_bn(const TrainConfig& c, const Communicator& comm) const {
    if (c.batch_size == 1 || (c.sync_bn && comm.size() > 1)) return false;
    if (train_loader_.sampler().num_samples() % c.batch_size != 1) return false;
    bool bn = false;
    s_.model->visit_layers([&](Layer& l) { bn = bn || dynamic_cast<BatchNorm2d*>(&l) != nullptr; });
    return bn;
  }
  const bool drop_single_;
};

}  // namespace

TrainResult train(const TrainConfig& c) {
  std::unique_ptr<Communicator> comm = make_communicator(c.comm, c.device);
  return train(c, *comm);
}

TrainResult train(const TrainConfig& c, Communicator& comm) {
  const OutDirClaim claim = prepare_run(c, comm);
  ImageTask task(c, comm);
  const LoopResult r = run_training(c, task, comm);
  TrainResult result;
  if (r.evaluated) result.last_eval = task.last_eval();
  result.steps = r.steps;
  result.seconds = r.seconds;
  result.mean_step_ms = r.mean_step_ms;
  result.interrupted_by = r.interrupted_by;
  return result;
}

EvalResult evaluate_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                               Communicator& comm_ref) {
  Communicator* comm = &comm_ref;
  // Read the architecture from the checkpoint first so the right model is built.
  std::map<std::string, std::string> meta = load_safetensors_metadata(checkpoint);
  TrainConfig c = config;
  if (c.arch.empty() && meta.count("arch")) {
    const std::vector<std::string> known = model_names();
    if (std::find(known.begin(), known.end(), meta["arch"]) == known.end()) {
      ST_THROW(checkpoint, ": checkpoint metadata 'arch' is '", meta["arch"],
               "', a model this build does not have (it has ", word_list(known), ")");
    }
    c.arch = meta["arch"];
  }
  ST_CHECK(!meta.count("arch") || meta["arch"] == c.arch, checkpoint, ": the checkpoint is a ",
           meta["arch"], ", not --arch ", c.arch, " (leave --arch out to use the checkpoint's)");
  ST_CHECK(!c.arch.empty(), checkpoint, ": no architecture recorded; pass --arch");
  Setup s = build(c, false, comm->placement());
  try {
    load_checkpoint(checkpoint, *s.model, nullptr, nullptr, {}, c.allow_unknown_tensors);
  } catch (const Error&) {
    // Another dataset gives the model other input channels or classes: the tensor shape
    // that differs is the symptom; the dataset is the cause.
    const auto trained_on = meta.find("dataset");
    if (trained_on == meta.end() || trained_on->second == c.dataset) throw;
    ST_THROW(checkpoint, ": trained on --dataset ", trained_on->second, ", not ", c.dataset,
             ", whose inputs or classes give the model other shapes; evaluate it on --dataset ",
             trained_on->second);
  }
  DataLoader loader = make_loader(s.test_set, c, false, *comm, s.device);
  DevicePrefetcher input(loader, s.device);
  return evaluate(*s.model, input, c.eval_batches, *comm, loader.sampler().real_samples());
}

}  // namespace st
