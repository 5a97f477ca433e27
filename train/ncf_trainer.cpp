#include "train/ncf_trainer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "comm/communicator.h"
#include "core/parallel.h"
#include "core/safetensors.h"
#include "core/word_list.h"
#include "data/implicit_feedback.h"
#include "layers/bce_with_logits.h"
#include "models/ncf.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint.h"
#include "train/flags.h"
#include "train/ranking_eval.h"
#include "train/run_folder.h"
#include "train/training_loop.h"

namespace st {

namespace {

const char* kSynthetic = "synthetic-ncf";  // ncf_dataset_names()' words
const char* kMovieLens = "movielens";
constexpr int kTrainNegatives = 4;           // per positive (He et al. 2017 sec. 4.1, MLPerf)
constexpr int64_t kEvalUsersPerBatch = 100;  // 10,000 candidate pairs a forward
constexpr int64_t kSyntheticUsers = 1000;

ImplicitFeedback open_feedback(const TrainConfig& c) {
  if (c.dataset == kSynthetic) {
    SyntheticNcfOptions o;
    if (c.synthetic_size > 0) o.users = c.synthetic_size;
    o.seed = c.seed;
    return synthetic_ncf(o);
  }
  ST_CHECK(c.dataset == kMovieLens, "--arch ncf: unknown --dataset '", c.dataset,
           "'; valid: ", word_list(ncf_dataset_names()));
  ST_CHECK(!c.data_dir.empty(), "--dataset ", kMovieLens,
           " needs --data-dir: a folder with MovieLens ratings.csv (ml-20m)");
  return read_movielens_ratings((std::filesystem::path(c.data_dir) / "ratings.csv").string(),
                                c.seed);
}

class NcfTask : public TrainingTask {
 public:
  NcfTask(const TrainConfig& c, Communicator& comm)
      : c_(c),
        comm_(comm),
        device_(start_device(c, comm)),
        data_(open_feedback(c)),
        schedule_(parse_lr_schedule(c.schedule, c.lr, c.epochs, c.warmup_epochs)) {
    Rng rng(c.seed);
    model_ = ncf(data_.users, data_.items, rng);
    model_->to(device_);
    const int64_t total = static_cast<int64_t>(data_.train_users.size()) * (1 + kTrainNegatives);
    per_rank_ = total / comm.size();  // the remainder (< P examples) is left out of the epoch
    ST_CHECK(per_rank_ > 0, data_.name, ": ", total, " training examples for ", comm.size(),
             " ranks; each rank needs at least one");
  }

  Layer& model() override { return *model_; }
  Device device() const override { return device_; }
  QualityMetric quality() const override { return QualityMetric::Accuracy; }
  const char* item_name() const override { return "pairs"; }
  const char* step_name() const override { return "batch"; }
  bool clips_before_exchange() const override { return false; }
  int64_t steps_per_epoch() const override {
    return (per_rank_ + c_.batch_size - 1) / c_.batch_size;
  }
  std::string startup_line() const override {
    char line[160];
    std::snprintf(line, sizeof line, "ncf: %s, %ld users, %ld items, %zu training positives",
                  data_.name.c_str(), static_cast<long>(data_.users),
                  static_cast<long>(data_.items), data_.train_users.size());
    return line;
  }

  // The epoch's examples depend on (seed, epoch) alone, so a resumed epoch draws the same
  // list and starts at its step.
  void start_epoch(int64_t epoch, int64_t first) override {
    examples_ = training_examples(data_, kTrainNegatives, c_.seed, epoch);
    begin_ = comm_.rank() * per_rank_;
    pos_ = std::min(first * c_.batch_size, per_rank_);
    model_->set_training(true);
  }
  bool load_batch() override {
    if (pos_ >= per_rank_) return false;
    const int64_t n = std::min(c_.batch_size, per_rank_ - pos_);
    const auto from = static_cast<size_t>(begin_ + pos_);
    std::vector<int32_t> ids(examples_.users.begin() + from, examples_.users.begin() + from + n);
    ids.insert(ids.end(), examples_.items.begin() + from, examples_.items.begin() + from + n);
    ids_ = Tensor::from_vector_i32(ids, Shape{2, n}).to(device_);
    labels_ = Tensor::from_vector(
        std::vector<float>(examples_.labels.begin() + from, examples_.labels.begin() + from + n),
        Shape{n});
    pos_ += n;
    return true;
  }
  StepLoss forward_loss() override {
    const Tensor logits = model_->forward(ids_);
    const float loss = bce_.forward(logits, labels_);
    return {loss, static_cast<double>(labels_.numel()), bce_.correct()};
  }
  Tensor loss_grad() override { return bce_.backward(); }

  float lr(int64_t epoch, int64_t b) const override {
    return schedule_.lr(epoch, b, steps_per_epoch());
  }
  Evaluation evaluate(bool) override {
    const RankingResult r =
        evaluate_ranking(*model_, data_, device_, kEvalUsersPerBatch, c_.eval_batches, comm_);
    last_ = r;
    evaluated_ = true;
    char summary[96];
    std::snprintf(summary, sizeof summary, "test loss %.4f HR@10 %.4f NDCG@10 %.4f", r.loss, r.hr,
                  r.ndcg);
    return {{{"test_loss", r.loss}, {"hr10", r.hr}, {"ndcg10", r.ndcg}}, summary, r.loss};
  }
  float end_epoch(int64_t epoch, const Evaluation&) override {
    return schedule_.lr(epoch, steps_per_epoch() - 1, steps_per_epoch());
  }
  std::map<std::string, std::string> metadata() const override {
    return flag_metadata(c_, SavedBy::image);
  }

  bool evaluated() const { return evaluated_; }
  const RankingResult& last() const { return last_; }

 private:
  static Device start_device(const TrainConfig& c, const Communicator& comm) {
    set_num_threads(c.threads);
    note_node_share(comm.placement().local_size);
    const Device d = parse_device(c.device, comm.placement());
    set_process_device(d);
    return d;
  }

  const TrainConfig& c_;
  Communicator& comm_;
  const Device device_;
  ImplicitFeedback data_;
  LayerPtr model_;
  LrSchedule schedule_;
  BceWithLogits bce_;
  NcfExamples examples_;
  int64_t per_rank_ = 0, begin_ = 0, pos_ = 0;
  Tensor ids_, labels_;
  RankingResult last_;
  bool evaluated_ = false;
};

}  // namespace

void apply_ncf_defaults(TrainConfig& c, const FlagGiven& given) {
  auto set = [&](auto field, auto value) {
    if (!given(flag_of(field))) c.*field = value;
  };
  set(&TrainConfig::dataset, std::string(kSynthetic));
  set(&TrainConfig::optimizer, std::string("adam"));
  set(&TrainConfig::lr, 0.001f);
  set(&TrainConfig::batch_size, int64_t{256});
  set(&TrainConfig::schedule, std::string("constant"));
}

NcfResult train_ncf(const TrainConfig& c, Communicator& comm) {
  const OutDirClaim claim = prepare_run(c, comm);
  NcfTask task(c, comm);
  const LoopResult r = run_training(c, task, comm);
  NcfResult result;
  result.evaluated = task.evaluated();
  result.test_loss = task.last().loss;
  result.hr10 = task.last().hr;
  result.ndcg10 = task.last().ndcg;
  result.steps = r.steps;
  result.seconds = r.seconds;
  result.mean_step_ms = r.mean_step_ms;
  result.interrupted_by = r.interrupted_by;
  return result;
}

}  // namespace st

namespace st {

bool is_ncf_checkpoint(const std::string& checkpoint) {
  const std::map<std::string, std::string> meta = load_safetensors_metadata(checkpoint);
  const auto it = meta.find("arch");
  return it != meta.end() && it->second == "ncf";
}

NcfResult evaluate_ncf_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                                  Communicator& comm) {
  const std::map<std::string, std::string> meta = load_safetensors_metadata(checkpoint);
  TrainConfig c = config;
  c.arch = "ncf";
  c.dataset = meta_string(meta, "dataset", checkpoint);
  c.seed = static_cast<uint64_t>(meta_int(meta, "seed", checkpoint, 0));
  c.synthetic_size = meta_int(meta, "synthetic_size", checkpoint, 0);
  NcfTask task(c, comm);
  load_checkpoint(checkpoint, task.model(), nullptr, nullptr, {}, c.allow_unknown_tensors);
  task.evaluate(true);
  NcfResult r;
  r.evaluated = true;
  r.test_loss = task.last().loss;
  r.hr10 = task.last().hr;
  r.ndcg10 = task.last().ndcg;
  return r;
}

}  // namespace st
