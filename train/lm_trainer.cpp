#include "train/lm_trainer.h"

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
#include "data/text_corpus.h"
#include "layers/flat_params.h"
#include "models/lstm_lm.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "sparsify/sparsify_hook.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/trace.h"
#include "train/train_common.h"

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
  if (dataset == "ptb" || dataset == "wikitext2" || dataset == "wikitext-2" || dataset == "text") {
    ST_CHECK(!data_dir.empty(), "--dataset ", dataset,
             " needs --data-dir: a folder with ptb.{train,valid,test}.txt, "
             "wiki.{train,valid,test}.tokens or {train,valid,test}.txt");
    return load_text_corpus(data_dir);
  }
  ST_THROW("--arch lstm: unknown --dataset '", dataset,
           "'; valid: fortunes (default), ptb, wikitext2, text (the last three with --data-dir)");
}

std::vector<int32_t> prefix(const std::vector<int32_t>& v, int64_t n) {
  if (n <= 0 || n >= static_cast<int64_t>(v.size())) return v;
  return std::vector<int32_t>(v.begin(), v.begin() + n);
}

// This rank's streams: rank r of P takes streams [r B, (r + 1) B) of a P B-stream batchify.
Tensor shard(const std::vector<int32_t>& tokens, int64_t per_rank, const Communicator& comm,
             const std::string& what) {
  Tensor all = batchify(tokens, per_rank * comm.size(), what);
  return take_streams(all, comm.rank() * per_rank, per_rank);
}

double perplexity(double loss) {
  return std::exp(std::min(loss, 700.0));
}

// Mean loss per token over this rank's streams, summed over ranks. The state starts at
// zero and is carried (detached) from window to window, as in training.
double evaluate(LstmLm& model, const Tensor& data, int64_t bptt, Device device, int64_t max_windows,
                Communicator& comm) {
  model.set_training(false);
  model.reset_state();
  LmCrossEntropy ce;
  double loss_sum = 0, tokens = 0;
  int64_t windows = num_bptt_windows(data.dim(0), bptt);
  if (max_windows > 0) windows = std::min(windows, max_windows);
  for (int64_t w = 0; w < windows; ++w) {
    BpttWindow win = bptt_window(data, w * bptt, bptt);
    Tensor logits = model.forward(win.input.to(device));
    const double n = static_cast<double>(win.target.numel());
    loss_sum += static_cast<double>(ce.forward(logits, win.target.to(device))) * n;
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

LstmLmConfig model_config(const LmOptions& lm, int64_t vocab, uint64_t seed) {
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

std::map<std::string, std::string> run_metadata(const TrainConfig& c, const LmOptions& lm,
                                                int64_t vocab, int world) {
  return {{"arch", kArch},
          {"dataset", c.dataset},
          {"data_dir", c.data_dir},
          {"sparsifier", c.sparsifier},
          {"density", std::to_string(c.density)},
          {"sp", format_sparsifier_params(c.sparsifier_params)},
          {"seed", std::to_string(c.seed)},
          {"lr", std::to_string(c.lr)},
          {"clip", std::to_string(c.clip)},
          {"batch_size", std::to_string(c.batch_size)},
          {"epochs", std::to_string(c.epochs)},
          {"world_size", std::to_string(world)},
          {"lm_vocab", std::to_string(vocab)},
          {"lm_layers", std::to_string(lm.layers)},
          {"lm_hidden", std::to_string(lm.hidden)},
          {"lm_emsize", std::to_string(lm.emsize)},
          {"lm_bptt", std::to_string(lm.bptt)},
          {"lm_dropout", std::to_string(lm.dropout)},
          {"lm_tied", lm.tied ? "1" : "0"},
          {"lm_max_vocab", std::to_string(lm.max_vocab)}};
}

const std::string& meta_at(const std::map<std::string, std::string>& meta, const std::string& key,
                           const std::string& path) {
  auto it = meta.find(key);
  ST_CHECK(it != meta.end(), path, ": checkpoint metadata lacks '", key, "'");
  return it->second;
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

}  // namespace

bool is_lm_checkpoint(const std::string& checkpoint) {
  const TensorFile f = load_safetensors(checkpoint);
  auto it = f.metadata.find("arch");
  return it != f.metadata.end() && it->second == kArch;
}

LmResult train_lm(const TrainConfig& c, const LmOptions& lm, Communicator& comm) {
  const int rank = comm.rank(), world = comm.size();
  const bool leader = rank == 0;
  ST_CHECK(c.batch_size > 0, "-b/--batch-size must be positive, got ", c.batch_size);
  ST_CHECK(c.epochs > 0, "--epochs must be positive, got ", c.epochs);
  ST_CHECK(lm.bptt > 0, "--bptt must be positive, got ", lm.bptt);
  ST_CHECK(lm.eval_batch_size > 0, "the evaluation batch size must be positive, got ",
           lm.eval_batch_size);
  set_num_threads(c.threads);
  const Device device = parse_device(c.device);
  ST_CHECK(device.is_cpu(), "--arch lstm runs on the CPU in this build (--device ", c.device,
           "): the embedding and the tied decoder have no CUDA kernels yet");

  // Data: each rank's contiguous shard of the streams.
  const TextCorpus corpus = open_corpus(c.dataset, c.data_dir, lm.max_vocab);
  if (leader) std::filesystem::create_directories(c.out);
  if (leader && c.dataset == "fortunes") write_corpus_files(corpus, fs::path(c.out) / "corpus");
  const Tensor train_data =
      shard(prefix(corpus.train, c.train_subset), c.batch_size, comm, corpus.name + " train split");
  const Tensor valid_data = shard(prefix(corpus.valid, c.test_subset), lm.eval_batch_size, comm,
                                  corpus.name + " validation split");
  const Tensor test_data = shard(prefix(corpus.test, c.test_subset), lm.eval_batch_size, comm,
                                 corpus.name + " test split");
  const int64_t vocab = corpus.vocab.size();

  // Model (same initialisation on every rank, then rank 0's broadcast); dropout masks
  // differ per rank.
  Rng rng(c.seed);
  LstmLm model(model_config(lm, vocab, c.seed * 1000003ull + static_cast<uint64_t>(rank)), rng);
  FlatParams flat(model, device);
  broadcast_model(model, flat, comm);

  // The exchange: dense allreduce or a sparsifier, in the bucketed reducer. Local
  // clipping needs the whole local gradient, so with --clip the buckets launch after
  // backward (after the clip) instead of during it.
  ReducerOptions ro;
  ro.bucket_cap_mb = c.bucket_cap_mb;
  ro.first_bucket_mb = c.first_bucket_mb;
  ro.defer_until_finalize = !c.overlap || c.clip > 0;
  std::shared_ptr<SparsifyHook> sparsify;
  std::shared_ptr<BucketHook> hook = make_exchange_hook(c, sparsify);
  Reducer reducer(flat, comm, hook, ro);
  SgdOptions so;
  so.lr = c.lr;
  so.momentum = c.momentum;
  so.weight_decay = c.weight_decay;
  so.nesterov = c.nesterov;
  so.no_decay_on_norm_and_bias = c.no_wd_on_bn;
  Sgd sgd(flat.params(), so);
  const bool plateau = c.schedule == "plateau";
  LrSchedule schedule;
  if (!plateau) schedule = parse_lr_schedule(c.schedule, c.lr, c.epochs, c.warmup_epochs);
  float plateau_lr = c.lr;
  double best_valid = INFINITY;

  const std::string ckpt_path = (fs::path(c.out) / "checkpoint.safetensors").string();
  auto meta = run_metadata(c, lm, vocab, world);
  TrainPosition pos;
  Tensor resume_h, resume_c;
  if (!c.resume.empty()) {
    std::map<std::string, std::string> saved;
    pos = load_checkpoint(c.resume, model, &sgd, &saved);
    resume_exchange(c, pos.step, reducer, sparsify.get(), comm);
    ST_CHECK(meta_at(saved, "arch", c.resume) == kArch, c.resume,
             ": not a language-model checkpoint");
    ST_CHECK(std::stoll(meta_at(saved, "lm_vocab", c.resume)) == vocab, c.resume,
             ": vocabulary of ", meta_at(saved, "lm_vocab", c.resume),
             " words, but the corpus has ", vocab);
    plateau_lr = std::stof(meta_at(saved, "lm_lr", c.resume));
    best_valid = std::stod(meta_at(saved, "lm_best_valid", c.resume));
    model.set_dropout_calls(std::stoull(meta_at(saved, "lm_dropout_calls", c.resume)));
    if (pos.batch > 0) {
      ST_CHECK(std::stoi(meta_at(saved, "world_size", c.resume)) == world, c.resume,
               ": a mid-epoch checkpoint of ", meta_at(saved, "world_size", c.resume),
               " ranks resumes only on as many ranks, not ", world);
      const TensorFile f = load_safetensors(c.resume);
      const Shape one{lm.layers, c.batch_size, lm.hidden};
      const Shape all{world, lm.layers, c.batch_size, lm.hidden};
      resume_h = f.get(kStateH, all, c.resume).slice_flat(rank * one.numel(), one).clone();
      resume_c = f.get(kStateC, all, c.resume).slice_flat(rank * one.numel(), one).clone();
    }
    if (!c.quiet && leader)
      std::fprintf(stderr, "resumed from %s at epoch %ld window %ld (step %ld)\n", c.resume.c_str(),
                   static_cast<long>(pos.epoch), static_cast<long>(pos.batch),
                   static_cast<long>(pos.step));
  }
  auto checkpoint = [&](const TrainPosition& at) {
    // Every rank joins the state gather; rank 0 writes.
    auto state = gather_state(model, comm);
    if (sparsify)
      for (auto& entry : gather_sparsify_state(*sparsify, comm)) state.push_back(std::move(entry));
    if (!leader) return;
    meta["lm_lr"] = std::to_string(plateau_lr);
    char best[40];
    std::snprintf(best, sizeof best, "%.17g", best_valid);
    meta["lm_best_valid"] = best;
    meta["lm_dropout_calls"] = std::to_string(model.dropout_calls());
    save_checkpoint(ckpt_path, model, &sgd, at, meta, state);
  };

  const MetricsFormat fmt = parse_metrics_format(c.metrics_format);
  const std::string ext = fmt == MetricsFormat::Csv ? ".csv" : ".jsonl";
  MetricsWriter iter_log, epoch_log;
  if (leader) {
    const bool append = !c.resume.empty();
    iter_log = MetricsWriter((fs::path(c.out) / ("iterations" + ext)).string(), fmt, append);
    epoch_log = MetricsWriter((fs::path(c.out) / ("epochs" + ext)).string(), fmt, append);
    nlohmann::json cfg = meta;
    cfg["corpus"] = corpus.name;
    cfg["train_tokens"] = corpus.train.size();
    cfg["valid_tokens"] = corpus.valid.size();
    cfg["test_tokens"] = corpus.test.size();
    if (std::FILE* f = std::fopen((fs::path(c.out) / "config.json").c_str(), "w")) {
      std::fputs(cfg.dump(2).c_str(), f);
      std::fclose(f);
    }
    if (!c.quiet)
      std::fprintf(stderr,
                   "%s: %zu/%zu/%zu tokens, vocabulary %ld; %s, %ld parameters; %d rank(s) x %ld "
                   "streams, bptt %ld\n",
                   corpus.name.c_str(), corpus.train.size(), corpus.valid.size(),
                   corpus.test.size(), static_cast<long>(vocab), model.describe().c_str(),
                   static_cast<long>(flat.numel()), world, static_cast<long>(c.batch_size),
                   static_cast<long>(lm.bptt));
  }

  const int64_t windows = num_bptt_windows(train_data.dim(0), lm.bptt);
  const int64_t total_steps =
      std::min<int64_t>(c.max_iters > 0 ? c.max_iters : INT64_MAX, windows * c.epochs);
  LmCrossEntropy ce;
  LmResult result;
  result.steps = pos.step;
  Timer wall;
  const int64_t start_step = pos.step;
  // Mean step time, without the first 5 steps of this run (allocations, page faults)
  // unless the run is shorter.
  double step_seconds = 0, step_ms_sum = 0, all_ms_sum = 0;
  int64_t step_ms_count = 0;
  auto mean_step_ms = [&]() {
    const int64_t all = result.steps - start_step;
    return step_ms_count ? step_ms_sum / step_ms_count : all > 0 ? all_ms_sum / all : 0.0;
  };
  const bool tty = isatty(STDERR_FILENO);
  const bool quiet = c.quiet || !leader;
  TraceWriter trace(rank);
  const int64_t trace_begin = start_step + 5, trace_end = trace_begin + c.trace_iters;
  bool tracing = false;
  if (!c.trace.empty()) trace_layer_backward(model, trace, tracing);

  for (int64_t epoch = pos.epoch; epoch < c.epochs; ++epoch) {
    model.set_training(true);
    int64_t w = epoch == pos.epoch ? pos.batch : 0;
    if (w > 0 && resume_h.defined())
      model.rnn().set_state(resume_h, resume_c);
    else
      model.reset_state();
    Timer epoch_timer;
    double loss_sum = 0, seen = 0;
    for (; w < windows; ++w) {
      Timer t;
      BpttWindow win = bptt_window(train_data, w * lm.bptt, lm.bptt);
      Tensor input = win.input.to(device), target = win.target.to(device);
      const double data_ms = t.ms();
      const float lr = plateau ? plateau_lr : schedule.lr(epoch, w, windows);
      sgd.set_lr(lr);
      tracing = !c.trace.empty() && result.steps >= trace_begin && result.steps < trace_end;
      const auto t_fwd = TraceWriter::Clock::now();
      t.reset();
      Tensor logits = model.forward(input);
      const float loss = ce.forward(logits, target);
      const double fwd_ms = t.ms();
      if (!std::isfinite(loss))
        ST_THROW("loss is ", loss, " at iteration ", result.steps, " (epoch ", epoch, ", window ",
                 w, "); stopping. The last good checkpoint is ", ckpt_path,
                 " (try a lower --lr or --clip)");
      t.reset();
      flat.zero_grads();
      const auto t_bwd = TraceWriter::Clock::now();
      reducer.begin_backward();
      model.backward(ce.backward());
      const double bwd_ms = t.ms();
      const auto t_bwd_end = TraceWriter::Clock::now();
      // Clip this rank's gradient before the exchange (the buckets are still waiting).
      t.reset();
      const double grad_norm = c.clip > 0 ? clip_grad_norm(flat.params(), c.clip) : 0.0;
      const double clip_ms = t.ms();
      const double comm_ms = reducer.finalize();
      t.reset();
      const auto t_opt = TraceWriter::Clock::now();
      sgd.step();
      model.detach_state();  // truncated BPTT: the next window starts from here, detached
      const double opt_ms = t.ms() + clip_ms;  // clipping counts as optimiser work
      if (tracing) {
        trace.span("forward", "forward", t_fwd, t_bwd);
        trace.span("backward step " + std::to_string(result.steps), "backward", t_bwd, t_bwd_end);
        trace_reducer_timeline(trace, reducer);
        trace.span("sgd step", "optimizer", t_opt, TraceWriter::Clock::now());
      }
      const double n = static_cast<double>(target.numel());
      loss_sum += static_cast<double>(loss) * n;
      seen += n;
      ++result.steps;
      const double step_ms = fwd_ms + bwd_ms + comm_ms + opt_ms;
      all_ms_sum += step_ms;
      if (result.steps - start_step > 5) {
        step_ms_sum += step_ms;
        ++step_ms_count;
      }
      const double iter_s = (data_ms + step_ms) / 1e3;
      step_seconds = result.steps - start_step == 1 ? iter_s : 0.9 * step_seconds + 0.1 * iter_s;
      MetricRow row{{"epoch", epoch},          {"iter", w},
                    {"step", result.steps},    {"loss", static_cast<double>(loss)},
                    {"ppl", perplexity(loss)}, {"lr", static_cast<double>(lr)},
                    {"grad_norm", grad_norm},  {"tokens_per_s", n * world / iter_s},
                    {"data_ms", data_ms},      {"fwd_ms", fwd_ms},
                    {"bwd_ms", bwd_ms},        {"comm_ms", comm_ms},
                    {"opt_ms", opt_ms},        {"wall_s", wall.seconds()}};
      if (sparsify) add_sparsify_metrics(sparsify->take_stats(), row);
      iter_log.write(row);
      if (!quiet && (result.steps % c.log_every == 0 || w + 1 == windows)) {
        const double eta = step_seconds * static_cast<double>(total_steps - result.steps);
        std::fprintf(stderr,
                     "%sepoch %ld/%ld  window %ld/%ld  loss %.4f  ppl %.1f  lr %.4g  %.0f tok/s  "
                     "ETA %s%s",
                     tty ? "\r" : "", static_cast<long>(epoch + 1), static_cast<long>(c.epochs),
                     static_cast<long>(w + 1), static_cast<long>(windows), loss_sum / seen,
                     perplexity(loss_sum / seen), lr, n * world / step_seconds,
                     format_duration(eta).c_str(), tty ? "   " : "\n");
      }
      const bool stop = result.steps >= total_steps && w + 1 < windows;
      if (stop || (c.checkpoint_every > 0 && result.steps % c.checkpoint_every == 0))
        checkpoint({epoch, w + 1, result.steps});
      if (!c.trace.empty() && leader && result.steps == trace_end) trace.write(c.trace);
      if (stop) {
        result.valid_loss = evaluate(model, valid_data, lm.bptt, device, c.eval_batches, comm);
        result.valid_ppl = perplexity(result.valid_loss);
        if (!quiet)
          std::fprintf(stderr,
                       "%sstopped at step %ld (--max-iters): valid loss %.4f ppl %.2f; "
                       "checkpoint %s\n",
                       tty ? "\n" : "", static_cast<long>(result.steps), result.valid_loss,
                       result.valid_ppl, ckpt_path.c_str());
        model.set_backward_observer(nullptr, "");
        result.seconds = wall.seconds();
        result.mean_step_ms = mean_step_ms();
        return result;
      }
    }
    // Validation (and test) perplexity; the plateau rule anneals the rate by 4.
    result.valid_loss = evaluate(model, valid_data, lm.bptt, device, c.eval_batches, comm);
    result.valid_ppl = perplexity(result.valid_loss);
    result.test_loss = evaluate(model, test_data, lm.bptt, device, c.eval_batches, comm);
    result.test_ppl = perplexity(result.test_loss);
    const float epoch_lr = plateau ? plateau_lr : schedule.lr(epoch, windows - 1, windows);
    if (plateau) {
      if (result.valid_loss < best_valid)
        best_valid = result.valid_loss;
      else
        plateau_lr /= 4.0f;
    }
    const double epoch_s = epoch_timer.seconds();
    loss_sum = comm.allreduce_scalar(loss_sum);
    seen = comm.allreduce_scalar(seen);
    const double train_loss = seen > 0 ? loss_sum / seen : 0.0;
    epoch_log.write({{"epoch", epoch},
                     {"step", result.steps},
                     {"train_loss", train_loss},
                     {"train_ppl", perplexity(train_loss)},
                     {"valid_loss", result.valid_loss},
                     {"valid_ppl", result.valid_ppl},
                     {"test_loss", result.test_loss},
                     {"test_ppl", result.test_ppl},
                     {"lr", static_cast<double>(epoch_lr)},
                     {"epoch_s", epoch_s},
                     {"wall_s", wall.seconds()},
                     {"peak_rss_mb", peak_rss_mb()}});
    model.reset_state();  // the next epoch starts from zeros: nothing to carry
    checkpoint({epoch + 1, 0, result.steps});
    if (!quiet)
      std::fprintf(stderr,
                   "%sepoch %ld done in %s: train ppl %.2f | valid loss %.4f ppl %.2f | test ppl "
                   "%.2f\n",
                   tty ? "\n" : "", static_cast<long>(epoch + 1), format_duration(epoch_s).c_str(),
                   perplexity(train_loss), result.valid_loss, result.valid_ppl, result.test_ppl);
    if (result.steps >= total_steps) break;
  }
  if (!c.trace.empty() && leader && !trace.empty() && result.steps < trace_end)
    trace.write(c.trace);
  model.set_backward_observer(nullptr, "");
  result.seconds = wall.seconds();
  result.mean_step_ms = mean_step_ms();
  return result;
}

LmResult evaluate_lm_checkpoint(const TrainConfig& config, const std::string& checkpoint,
                                Communicator& comm) {
  const TensorFile f = load_safetensors(checkpoint);
  const auto& meta = f.metadata;
  ST_CHECK(meta.count("arch") && meta.at("arch") == kArch, checkpoint,
           ": not a language-model checkpoint");
  set_num_threads(config.threads);
  const Device device = parse_device(config.device);
  ST_CHECK(device.is_cpu(), "--arch lstm evaluates on the CPU in this build");
  LmOptions lm;
  lm.layers = std::stoi(meta_at(meta, "lm_layers", checkpoint));
  lm.hidden = std::stoll(meta_at(meta, "lm_hidden", checkpoint));
  lm.emsize = std::stoll(meta_at(meta, "lm_emsize", checkpoint));
  lm.bptt = std::stoll(meta_at(meta, "lm_bptt", checkpoint));
  lm.tied = meta_at(meta, "lm_tied", checkpoint) == "1";
  lm.max_vocab = std::stoll(meta_at(meta, "lm_max_vocab", checkpoint));
  const std::string dataset =
      config.dataset.empty() ? meta_at(meta, "dataset", checkpoint) : config.dataset;
  const std::string data_dir =
      config.data_dir.empty() && meta.count("data_dir") ? meta.at("data_dir") : config.data_dir;
  const TextCorpus corpus = open_corpus(dataset, data_dir, lm.max_vocab);
  const int64_t vocab = std::stoll(meta_at(meta, "lm_vocab", checkpoint));
  ST_CHECK(corpus.vocab.size() == vocab, checkpoint, ": the model has a vocabulary of ", vocab,
           " words but ", corpus.name, " gives ", corpus.vocab.size());
  Rng rng(0);
  LstmLm model(model_config(lm, vocab, 0), rng);
  load_checkpoint(checkpoint, model, nullptr);
  const Tensor test_data = shard(prefix(corpus.test, config.test_subset), lm.eval_batch_size, comm,
                                 corpus.name + " test split");
  LmResult r;
  r.test_loss = evaluate(model, test_data, lm.bptt, device, config.eval_batches, comm);
  r.test_ppl = perplexity(r.test_loss);
  return r;
}

}  // namespace st
