#include "train/lm_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "core/parallel.h"
#include "core/safetensors.h"
#include "core/word_list.h"
#include "data/text_corpus.h"
#include "models/lstm_lm.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint.h"
#include "train/flags.h"
#include "train/run_folder.h"
#include "train/training_loop.h"

namespace st {

namespace {

namespace fs = std::filesystem;

const char* kArch = "lstm";
const char* kStateH = "lm_state.h";  // carried LSTM state of every rank, [P, L, B, H]
const char* kStateC = "lm_state.c";

TextCorpus open_corpus(const std::string& dataset, const std::string& data_dir, int64_t max_vocab) {
  if (dataset == "fortunes") {
    FortunesOptions o;
    if (!data_dir.empty()) o.dir = data_dir;
    o.max_vocab = max_vocab;
    return load_fortunes_corpus(o);
  }
  const std::vector<std::string>& names = text_corpus_names();
  ST_CHECK(std::find(names.begin(), names.end(), dataset) != names.end(),
           "--arch lstm: unknown --dataset '", dataset, "'; valid: ", word_list(names),
           " (all but fortunes with --data-dir)");
  ST_CHECK(!data_dir.empty(), "--dataset ", dataset,
           " needs --data-dir: a folder with ptb.{train,valid,test}.txt, "
           "wiki.{train,valid,test}.tokens or {train,valid,test}.txt");
  return load_text_corpus(data_dir);
}

std::vector<int32_t> prefix(const std::vector<int32_t>& v, int64_t n) {
  if (n <= 0 || n >= static_cast<int64_t>(v.size())) return v;
  return std::vector<int32_t>(v.begin(), v.begin() + n);
}

// This rank's streams: rank r of P takes streams [r B, (r + 1) B) of a P B-stream
// batchify, on `device`. The shard stays there for the whole run (a few MB of int32 ids
// for PTB or WikiText-2), so a training window is a view and no step copies its input.
Tensor shard(const std::vector<int32_t>& tokens, int64_t per_rank, const Communicator& comm,
             const std::string& what, Device device) {
  Tensor all = batchify(tokens, per_rank * comm.size(), what);
  return take_streams(all, comm.rank() * per_rank, per_rank).to(device);
}

// Mean loss per token over this rank's streams (`data` on the model's device), summed
// over ranks. The state starts at zero and is carried (detached) from window to window,
// as in training.
double evaluate(LstmLm& model, const Tensor& data, int64_t bptt, int64_t max_windows,
                Communicator& comm) {
  model.set_training(false);
  model.reset_state();
  LmCrossEntropy ce;
  double loss_sum = 0, tokens = 0;
  int64_t windows = num_bptt_windows(data.dim(0), bptt);
  if (max_windows > 0) windows = std::min(windows, max_windows);
  for (int64_t w = 0; w < windows; ++w) {
    BpttWindow win = bptt_window(data, w * bptt, bptt);
    Tensor logits = model.forward(win.input);
    const double n = static_cast<double>(win.target.numel());
    loss_sum += static_cast<double>(ce.forward(logits, win.target)) * n;
    tokens += n;
    model.detach_state();
  }
  model.set_training(true);
  model.reset_state();
  loss_sum = comm.allreduce_scalar(loss_sum);
  tokens = comm.allreduce_scalar(tokens);
  ST_CHECK(tokens > 0, "evaluation: no tokens");
  return loss_sum / tokens;
}

std::map<std::string, std::string> run_metadata(const TrainConfig& c, const LmOptions& lm,
                                                int64_t vocab, int world) {
  std::map<std::string, std::string> meta = flag_metadata(c, SavedBy::lm);
  meta["arch"] = kArch;
  meta["world_size"] = std::to_string(world);
  meta["lm_vocab"] = std::to_string(vocab);
  meta["lm_max_vocab"] = std::to_string(lm.max_vocab);
  return meta;
}

// The carried state of every rank, gathered for rank 0's checkpoint (a collective).
std::vector<std::pair<std::string, Tensor>> gather_state(LstmLm& model, Communicator& comm) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : {std::pair<const char*, Tensor>{kStateH, model.rnn().final_h()},
                                std::pair<const char*, Tensor>{kStateC, model.rnn().final_c()}}) {
    Tensor local = t.to(Device::cpu()).clone();
    Shape all_shape{comm.size(), local.dim(0), local.dim(1), local.dim(2)};
    Tensor all = Tensor::empty(all_shape);
    if (comm.size() == 1) {
      all.copy_from(local.reshape(all_shape));
    } else {
      Tensor flat = all.reshape(Shape{all.numel()});
      comm.allgather(local.reshape(Shape{local.numel()}), flat);
    }
    out.emplace_back(name, all);
  }
  return out;
}

// The language model: BPTT windows over this rank's streams, carried (detached) LSTM
// state, local clipping before the exchange, perplexity on the validation split (and the
// test split at epoch ends), and the plateau LR policy (or any --schedule).
class LmTask : public TrainingTask {
 public:
  LmTask(const TrainConfig& c, const LmOptions& lm, Communicator& comm);

  Layer& model() override { return model_; }
  Device device() const override { return device_; }
  QualityMetric quality() const override { return QualityMetric::Perplexity; }
  const char* item_name() const override { return "tokens"; }
  const char* step_name() const override { return "window"; }
  bool clips_before_exchange() const override { return true; }
  int64_t steps_per_epoch() const override { return windows_; }

  void start_epoch(int64_t /*epoch*/, int64_t first) override {
    model_.set_training(true);
    w_ = first;
    if (first > 0 && resume_h_.defined())
      model_.rnn().set_state(resume_h_.to(device_), resume_c_.to(device_));
    else
      model_.reset_state();
  }
  bool load_batch() override {
    if (w_ >= windows_) return false;
    BpttWindow win = bptt_window(train_data_, w_ * lm_.bptt, lm_.bptt);  // views on device_
    input_ = win.input;
    target_ = win.target;
    ++w_;
    return true;
  }
  StepLoss forward_loss() override {
    Tensor logits = model_.forward(input_);
    const float loss = ce_.forward(logits, target_);
    return {loss, static_cast<double>(target_.numel()), 0};
  }
  Tensor loss_grad() override { return ce_.backward(); }
  // Truncated BPTT: the next window starts from here, detached.
  void after_step() override { model_.detach_state(); }

  float lr(int64_t epoch, int64_t w) const override {
    return plateau_ ? plateau_lr_ : schedule_.lr(epoch, w, windows_);
  }
  Evaluation evaluate(bool epoch_end) override;
  float end_epoch(int64_t epoch, const Evaluation& e) override;

  std::map<std::string, std::string> metadata() const override {
    return run_metadata(c_, lm_, vocab_, comm_.size());
  }
  void add_config(nlohmann::json& cfg) const override {
    cfg["corpus"] = corpus_.name;
    cfg["train_tokens"] = corpus_.train.size();
    cfg["valid_tokens"] = corpus_.valid.size();
    cfg["test_tokens"] = corpus_.test.size();
  }
  std::string startup_line() const override;
  void checkpoint_state(std::vector<std::pair<std::string, Tensor>>& tensors,
                        std::map<std::string, std::string>& meta) override;
  void restore(const std::string& path, const std::map<std::string, std::string>& saved,
               const TrainPosition& pos) override;

  double valid_loss = 0, test_loss = 0;
  bool valid_evaluated = false, test_evaluated = false;

 private:
  const TrainConfig& c_;
  const LmOptions& lm_;
  Communicator& comm_;
  Device device_;
  TextCorpus corpus_;
  Tensor train_data_, valid_data_, test_data_;
  int64_t vocab_, windows_;
  Rng rng_;
  LstmLm model_;
  LmCrossEntropy ce_;
  Tensor input_, target_;
  int64_t w_ = 0;
  const bool plateau_;
  LrSchedule schedule_;
  float plateau_lr_;
  double best_valid_ = INFINITY;
  Tensor resume_h_, resume_c_;  // this rank's carried state of a mid-epoch checkpoint
};

void check_options(const TrainConfig& c, const LmOptions& lm) {
  ST_CHECK(c.batch_size > 0, "-b/--batch-size must be positive, got ", c.batch_size);
  ST_CHECK(c.epochs > 0, "--epochs must be positive, got ", c.epochs);
  ST_CHECK(lm.bptt > 0, "--bptt must be positive, got ", lm.bptt);
  ST_CHECK(lm.eval_batch_size > 0, "the evaluation batch size must be positive, got ",
           lm.eval_batch_size);
}

Device lm_device(const TrainConfig& c, const NodePlacement& placement) {
  set_num_threads(c.threads);
  const Device device = parse_device(c.device, placement);
  set_process_device(device);
  return device;
}

// Data: each rank's contiguous shard of the streams. The model has the same
// initialisation on every rank (then rank 0's broadcast); dropout masks differ per rank.
LmTask::LmTask(const TrainConfig& c, const LmOptions& lm, Communicator& comm)
    : c_(c),
      lm_(lm),
      comm_(comm),
      device_((check_options(c, lm), lm_device(c, comm.placement()))),
      corpus_(open_corpus(c.dataset, c.data_dir, lm.max_vocab)),
      train_data_(shard(prefix(corpus_.train, c.train_subset), c.batch_size, comm,
                        corpus_.name + " train split", device_)),
      valid_data_(shard(prefix(corpus_.valid, c.test_subset), lm.eval_batch_size, comm,
                        corpus_.name + " validation split", device_)),
      test_data_(shard(prefix(corpus_.test, c.test_subset), lm.eval_batch_size, comm,
                       corpus_.name + " test split", device_)),
      vocab_(corpus_.vocab.size()),
      windows_(num_bptt_windows(train_data_.dim(0), lm.bptt)),
      rng_(c.seed),
      model_(lm_model_config(lm, vocab_, c.seed * 1000003ull + static_cast<uint64_t>(comm.rank())),
             rng_),
      plateau_(c.schedule == "plateau"),
      plateau_lr_(c.lr) {
  if (!plateau_) schedule_ = parse_lr_schedule(c.schedule, c.lr, c.epochs, c.warmup_epochs);
  if (comm.rank() == 0 && c.dataset == "fortunes")
    write_corpus_files(corpus_, fs::path(c.out) / "corpus");
}

TrainingTask::Evaluation LmTask::evaluate(bool epoch_end) {
  valid_loss = st::evaluate(model_, valid_data_, lm_.bptt, c_.eval_batches, comm_);
  valid_evaluated = true;
  char summary[96];
  if (!epoch_end) {
    std::snprintf(summary, sizeof summary, "valid loss %.4f ppl %.2f", valid_loss,
                  perplexity(valid_loss));
    return {{}, summary, valid_loss};
  }
  test_loss = st::evaluate(model_, test_data_, lm_.bptt, c_.eval_batches, comm_);
  test_evaluated = true;
  std::snprintf(summary, sizeof summary, "valid loss %.4f ppl %.2f | test ppl %.2f", valid_loss,
                perplexity(valid_loss), perplexity(test_loss));
  return {{{"valid_loss", valid_loss},
           {"valid_ppl", perplexity(valid_loss)},
           {"test_loss", test_loss},
           {"test_ppl", perplexity(test_loss)}},
          summary,
          valid_loss};
}

// The plateau rule divides the rate by 4 whenever the validation loss fails to improve
// (the PyTorch word_language_model example). The next epoch starts from zero state.
float LmTask::end_epoch(int64_t epoch, const Evaluation& e) {
  const float epoch_lr = lr(epoch, windows_ - 1);
  if (plateau_) {
    if (e.loss < best_valid_)
      best_valid_ = e.loss;
    else
      plateau_lr_ /= 4.0f;
  }
  model_.reset_state();
  return epoch_lr;
}

std::string LmTask::startup_line() const {
  int64_t parameters = 0;
  for (const Param* p : collect_params(const_cast<LstmLm&>(model_))) parameters += p->value.numel();
  char line[256];
  std::snprintf(line, sizeof line,
                "%s: %zu/%zu/%zu tokens, vocabulary %ld; %s, %ld parameters; %d rank(s) x %ld "
                "streams, bptt %ld",
                corpus_.name.c_str(), corpus_.train.size(), corpus_.valid.size(),
                corpus_.test.size(), static_cast<long>(vocab_), model_.describe().c_str(),
                static_cast<long>(parameters), comm_.size(), static_cast<long>(c_.batch_size),
                static_cast<long>(lm_.bptt));
  return line;
}

void LmTask::checkpoint_state(std::vector<std::pair<std::string, Tensor>>& tensors,
                              std::map<std::string, std::string>& meta) {
  tensors = gather_state(model_, comm_);
  meta["lm_lr"] = std::to_string(plateau_lr_);
  char best[40];
  std::snprintf(best, sizeof best, "%.17g", best_valid_);
  meta["lm_best_valid"] = best;
  meta["lm_dropout_calls"] = std::to_string(model_.dropout_calls());
}

void LmTask::restore(const std::string& path, const std::map<std::string, std::string>& saved,
                     const TrainPosition& pos) {
  ST_CHECK(meta_string(saved, "arch", path) == kArch, path, ": not a language-model checkpoint");
  ST_CHECK(meta_int(saved, "lm_vocab", path) == vocab_, path, ": vocabulary of ",
           meta_string(saved, "lm_vocab", path), " words, but the corpus has ", vocab_);
  plateau_lr_ = static_cast<float>(meta_double(saved, "lm_lr", path));
  best_valid_ = meta_double(saved, "lm_best_valid", path);
  model_.set_dropout_calls(static_cast<uint64_t>(meta_int(saved, "lm_dropout_calls", path)));
  // A mid-epoch checkpoint carries every rank's state; the training loop has already
  // checked that this run has as many ranks.
  if (pos.batch == 0) return;
  const int world = comm_.size(), rank = comm_.rank();
  const TensorFile f = load_safetensors(path);
  const Shape one{lm_.layers, c_.batch_size, lm_.hidden};
  const Shape all{world, lm_.layers, c_.batch_size, lm_.hidden};
  resume_h_ = f.get(kStateH, all, path).slice_flat(rank * one.numel(), one).clone();
  resume_c_ = f.get(kStateC, all, path).slice_flat(rank * one.numel(), one).clone();
}

}  // namespace

LstmLmConfig lm_model_config(const LmOptions& lm, int64_t vocab, uint64_t seed) {
  LstmLmConfig m;
  m.vocab = vocab;
  m.emsize = lm.emsize;
  m.hidden = lm.hidden;
  m.layers = lm.layers;
  m.dropout = lm.dropout;
  m.tied = lm.tied;
  m.seed = seed;
  return m;
}

bool is_lm_checkpoint(const std::string& checkpoint) {
  const TensorFile f = load_safetensors(checkpoint);
  auto it = f.metadata.find("arch");
  return it != f.metadata.end() && it->second == kArch;
}

LmResult train_lm(const TrainConfig& config, const LmOptions& lm, Communicator& comm) {
  TrainConfig c = config;
  c.lm = lm;
  return train_lm(c, comm);
}

LmResult train_lm(const TrainConfig& c, Communicator& comm) {
  const OutDirClaim claim = prepare_run(c, comm);
  LmTask task(c, c.lm, comm);
  const LoopResult r = run_training(c, task, comm);
  LmResult result;
  result.valid_evaluated = task.valid_evaluated;
  result.test_evaluated = task.test_evaluated;
  if (task.valid_evaluated) {
    result.valid_loss = task.valid_loss;
    result.valid_ppl = perplexity(task.valid_loss);
  }
  if (task.test_evaluated) {
    result.test_loss = task.test_loss;
    result.test_ppl = perplexity(task.test_loss);
  }
  result.steps = r.steps;
  result.seconds = r.seconds;
  result.mean_step_ms = r.mean_step_ms;
  result.interrupted_by = r.interrupted_by;
  return result;
}

LmResult evaluate_lm_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                                Communicator& comm) {
  const TensorFile f = load_safetensors(checkpoint);
  const auto& meta = f.metadata;
  ST_CHECK(meta.count("arch") && meta.at("arch") == kArch, checkpoint,
           ": not a language-model checkpoint");
  set_num_threads(config.threads);
  const Device device = parse_device(config.device, comm.placement());
  set_process_device(device);
  LmOptions lm;
  lm.layers = static_cast<int>(meta_int(meta, "lm_layers", checkpoint));
  lm.hidden = meta_int(meta, "lm_hidden", checkpoint);
  lm.emsize = meta_int(meta, "lm_emsize", checkpoint);
  lm.bptt = meta_int(meta, "lm_bptt", checkpoint);
  lm.tied = meta_string(meta, "lm_tied", checkpoint) == "1";
  lm.max_vocab = meta_int(meta, "lm_max_vocab", checkpoint);
  const std::string dataset =
      config.dataset.empty() ? meta_string(meta, "dataset", checkpoint) : config.dataset;
  const std::string data_dir =
      config.data_dir.empty() && meta.count("data_dir") ? meta.at("data_dir") : config.data_dir;
  const TextCorpus corpus = open_corpus(dataset, data_dir, lm.max_vocab);
  const int64_t vocab = meta_int(meta, "lm_vocab", checkpoint);
  ST_CHECK(corpus.vocab.size() == vocab, checkpoint, ": the model has a vocabulary of ", vocab,
           " words but ", corpus.name, " gives ", corpus.vocab.size());
  Rng rng(0);
  LstmLm model(lm_model_config(lm, vocab, 0), rng);
  load_checkpoint(checkpoint, model, nullptr, nullptr, {},  // host tensors, copied into the model
                  config.allow_unknown_tensors);
  model.to(device);
  const Tensor test_data = shard(prefix(corpus.test, config.test_subset), lm.eval_batch_size, comm,
                                 corpus.name + " test split", device);
  LmResult r;
  r.test_loss = evaluate(model, test_data, lm.bptt, config.eval_batches, comm);
  r.test_ppl = perplexity(r.test_loss);
  r.test_evaluated = true;
  return r;
}

}  // namespace st
