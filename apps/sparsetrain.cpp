// The sparsetrain command line: `train`, `eval`, `sparsifiers`, `pack`. Parsing and printing only;
// the work (and each kind of training's defaults) is in train/.
// Every error becomes one line on stderr and exit code 1 (2 for bad flags).
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

#include "comm/mpi_communicator.h"
#include "comm/mpi_env.h"
#include "core/build_info.h"
#include "core/error.h"
#include "data/packed.h"
#include "data/registry.h"
#include "models/registry.h"
#include "sparsify/registry.h"
#include "train/checkpoint.h"
#include "train/config_check.h"
#include "train/lm_trainer.h"
#include "train/trainer.h"

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Flags shared by train and eval.
void add_data_flags(CLI::App* app, st::TrainConfig& c) {
  app->add_option("--arch,-a", c.arch,
                  "model architecture: " + join(st::model_names()) + ", lstm (language model)")
      ->capture_default_str();
  app->add_option("--dataset", c.dataset,
                  "dataset: " + join(st::dataset_names()) +
                      "; for --arch lstm: fortunes (default), ptb, wikitext2, text")
      ->capture_default_str();
  app->add_option("--data-dir", c.data_dir,
                  "folder with the dataset files (fashion-mnist defaults to "
                  "/usr/share/datasets/fashion-mnist)");
  app->add_option("--synthetic-size", c.synthetic_size,
                  "examples per epoch for --dataset synthetic (0 = 50000)");
  app->add_option("--image-size", c.image_size, "input side in pixels (0 = the model's own)");
  app->add_option("--test-subset", c.test_subset, "use only the first N test examples (0 = all)");
  app->add_option("-b,--batch-size", c.batch_size, "mini-batch size per process")
      ->capture_default_str();
  app->add_option("--threads", c.threads, "CPU threads for compute")->capture_default_str();
  app->add_option("--workers", c.workers, "data-loading threads (0 = load inline)")
      ->capture_default_str();
  app->add_option("--device", c.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  app->add_option("--seed", c.seed, "seed for initialisation, shuffling and augmentation")
      ->capture_default_str();
  app->add_option("--eval-batches", c.eval_batches,
                  "evaluate on at most this many test batches (0 = all)");
  app->add_flag("--allow-unknown-tensors", c.allow_unknown_tensors,
                "load a checkpoint that holds tensors which are neither this model's nor "
                "trainer state (PyTorch's strict=False); without it they are an error");
}

// Flags of `train` (the data flags included).
void add_train_flags(CLI::App* app, st::TrainConfig& c, st::LmOptions& lm,
                     std::vector<std::string>& sp_pairs) {
  add_data_flags(app, c);
  app->add_option("--train-subset", c.train_subset,
                  "use only the first N training examples (0 = all)");
  app->add_option("--epochs", c.epochs, "number of epochs")->capture_default_str();
  app->add_option("--accum-steps", c.accum_steps,
                  "micro-batches of -b per optimiser step (gradient accumulation; the exchange "
                  "runs once per step, in the last micro-batch's backward)")
      ->capture_default_str();
  app->add_option("--optimizer", c.optimizer,
                  "sgd, adam or adamw (PyTorch's semantics; adam/adamw take --betas, --eps, and "
                  "--wd as L2 (adam) or decoupled decay (adamw, default 0.01))")
      ->capture_default_str();
  app->add_option("--lr", c.lr, "base learning rate")->capture_default_str();
  app->add_option_function<std::vector<double>>(
         "--betas",
         [&c](const std::vector<double>& b) {
           c.beta1 = b.at(0);
           c.beta2 = b.at(1);
         },
         "adam/adamw: the two decay rates (default 0.9 0.999)")
      ->expected(2);
  app->add_option("--eps", c.eps, "adam/adamw: epsilon")->capture_default_str();
  app->add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str();
  app->add_option("--wd,--weight-decay", c.weight_decay, "weight decay")->capture_default_str();
  app->add_flag("--nesterov", c.nesterov, "Nesterov momentum");
  app->add_flag("--no-wd-bn", c.no_wd_on_bn, "no weight decay on BatchNorm and bias parameters");
  app->add_option("--schedule", c.schedule,
                  "LR schedule: constant | cosine | multistep (epochs at 50% and 75%) | "
                  "multistep:E1,E2[:gamma]")
      ->capture_default_str();
  app->add_option("--warmup-epochs", c.warmup_epochs, "linear LR warm-up epochs (fractional ok)")
      ->capture_default_str();
  app->add_option("--clip", c.clip,
                  "clip the global gradient norm to this (0 = off; --arch lstm: 0.25, each "
                  "rank's gradient before the exchange)");
  app->add_option("--precision", c.precision,
                  "Conv2d/Linear arithmetic: fp32, bf16 (oneDNN bf16 kernels on the CPU) or fp16 "
                  "(dynamic loss scaling; emulated by rounding on the CPU); weights, BatchNorm "
                  "and the loss stay fp32 (docs/PRECISION.md)")
      ->capture_default_str();
  app->add_option("--comm-dtype", c.comm_dtype,
                  "format of the dense gradient exchange: fp32, bf16 or fp16 (16-bit values "
                  "on the wire, summed in fp32)")
      ->capture_default_str();
  app->add_flag_callback(
      "--no-augment", [&c] { c.augment = false; }, "disable training augmentation");
  app->add_option("--max-iters", c.max_iters,
                  "stop after this many steps in total, writing a checkpoint (0 = no limit)");
  app->add_option("--out,-o", c.out, "output folder: checkpoint, metrics, config")
      ->capture_default_str();
  app->add_option("--resume", c.resume, "checkpoint to continue from (exactly, on CPU)");
  app->add_option("--metrics-format", c.metrics_format, "csv or jsonl")->capture_default_str();
  app->add_option("--log-every", c.log_every, "iterations between progress lines")
      ->capture_default_str();
  app->add_option("--checkpoint-every", c.checkpoint_every,
                  "also checkpoint every N iterations (0 = at epoch ends only)");
  app->add_option("--checkpoint-minutes", c.checkpoint_minutes,
                  "also checkpoint after this many minutes of wall time (0 = off)")
      ->capture_default_str();
  app->add_flag("--overwrite", c.overwrite,
                "replace the run already in --out (without it, such a folder is an error)");
  app->add_flag("--quiet,-q", c.quiet, "no progress lines");
  app->add_flag("--check-flags", c.check_flags,
                "check the flags and --sp keys as a run does at its start, then exit (0: they "
                "are valid; nothing is read or written)");
  app->add_option("--comm", c.comm, "communication backend: auto, mpi, nccl, local")
      ->capture_default_str();
  app->add_option("--bucket-cap-mb", c.bucket_cap_mb,
                  "gradient bucket size in MB (huge = one whole-model bucket)")
      ->capture_default_str();
  app->add_option("--first-bucket-mb", c.first_bucket_mb, "size of the first, small bucket")
      ->capture_default_str();
  app->add_flag("--print-buckets", c.print_buckets,
                "print the gradient bucket plan (buckets, sizes, parameters in ready order)");
  app->add_flag("--print-placement", c.print_placement,
                "every rank prints its rank, host and node-local rank (which GPU it uses)");
  app->add_flag("--sync-bn", c.sync_bn,
                "BatchNorm batch statistics over all ranks (synchronised), not per rank");
  app->add_flag_callback(
      "--no-overlap", [&c] { c.overlap = false; },
      "exchange all buckets after backward instead of during it (baseline)");
  app->add_option("--sparsifier", c.sparsifier, st::sparsifier_flag_help())->capture_default_str();
  app->add_option("--density", c.density, "target density d (fraction of gradients sent)")
      ->capture_default_str();
  app->add_option("--dense-warmup-iters", c.dense_warmup_iters,
                  "dense exchanges before sparsification starts")
      ->capture_default_str();
  app->add_option("--sp", sp_pairs,
                  "sparsifier parameters key=value, e.g. --sp hi=1.2 lo=0.8 (repeatable; "
                  "keys per method in `sparsetrain sparsifiers`)");
  app->add_option("--trace", c.trace,
                  "write a Chrome-trace timeline (Perfetto) of a few iterations to this file");
  app->add_option("--trace-iters", c.trace_iters, "iterations in the trace (after 5 warm-up)")
      ->capture_default_str();
  // The LSTM language model (--arch lstm); its defaults for the shared flags are in
  // st::apply_lm_defaults.
  app->add_option("--layers", lm.layers, "LSTM layers (--arch lstm)")->capture_default_str();
  app->add_option("--hidden", lm.hidden, "LSTM hidden units (--arch lstm)")->capture_default_str();
  app->add_option("--emsize", lm.emsize, "word embedding size (--arch lstm)")
      ->capture_default_str();
  app->add_option("--bptt", lm.bptt, "truncated-BPTT window length (--arch lstm)")
      ->capture_default_str();
  app->add_option("--dropout", lm.dropout, "dropout probability (--arch lstm)")
      ->capture_default_str();
  app->add_flag("--tied", lm.tied, "tie the decoder to the embedding (--arch lstm)");
}
// The result as one JSON line on stdout, from rank 0 only.
void print_result(const st::LmResult& r, const st::Communicator& comm) {
  if (comm.rank() != 0) return;
  if (r.steps == 0) {  // evaluation of a checkpoint
    std::printf("{\"test_loss\":%.4f,\"test_ppl\":%.2f}\n", r.test_loss, r.test_ppl);
    return;
  }
  // A split never evaluated (a run stopped before its evaluation) is left out, not shown as 0.
  std::printf("{\"steps\":%ld,\"seconds\":%.1f,\"step_ms\":%.2f", static_cast<long>(r.steps),
              r.seconds, r.mean_step_ms);
  if (r.valid_evaluated)
    std::printf(",\"valid_loss\":%.4f,\"valid_ppl\":%.2f", r.valid_loss, r.valid_ppl);
  if (r.test_evaluated)
    std::printf(",\"test_loss\":%.4f,\"test_ppl\":%.2f", r.test_loss, r.test_ppl);
  std::printf("}\n");
}

void print_result(const st::TrainResult& r, const st::Communicator& comm) {
  if (comm.rank() != 0) return;
  if (r.last_eval.examples > 0)
    std::printf("{\"steps\":%ld,\"seconds\":%.1f,\"test_loss\":%.4f,\"test_acc\":%.2f}\n",
                static_cast<long>(r.steps), r.seconds, r.last_eval.loss, r.last_eval.accuracy);
  else
    std::printf("{\"steps\":%ld,\"seconds\":%.1f}\n", static_cast<long>(r.steps), r.seconds);
}

void print_result(const st::EvalResult& r, const st::Communicator& comm) {
  if (comm.rank() != 0) return;
  std::printf("{\"examples\":%ld,\"test_loss\":%.4f,\"test_acc\":%.2f}\n",
              static_cast<long>(r.examples), r.loss, r.accuracy);
}

}  // namespace

int main(int argc, char** argv) {
  st::set_mpi_env_defaults();  // before MPI_Init reads them (comm/mpi_env.h)
  // Idle OpenMP threads should sleep, not spin: the data-loading threads share the cores
  // with them (measured: 3x faster small-CNN steps on a loaded 2-core machine). libgomp
  // reads OMP_WAIT_POLICY when it loads, before main, so set it and re-exec once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
  }
  CLI::App app{"sparsetrain: data-parallel training with gradient sparsification"};
  app.require_subcommand(1);
  // Version, commit and the backends built in (core/build_info.h).
  std::string version = st::build_info_text();
  version.pop_back();  // CLI11 ends the text with its own newline
  app.set_version_flag("--version", version, "print the version, commit and backends, then exit");
  st::TrainConfig tc;
  st::LmOptions lm;
  std::vector<std::string> sp_pairs;
  CLI::App* train = app.add_subcommand("train", "train a model");
  add_train_flags(train, tc, lm, sp_pairs);

  CLI::App* list = app.add_subcommand("sparsifiers", "list the gradient sparsifiers");
  bool list_json = false;
  list->add_flag("--json", list_json, "as JSON: name, summary, paper, pattern, --sp keys");

  st::TrainConfig ec;
  ec.arch.clear();
  std::string checkpoint;
  CLI::App* eval = app.add_subcommand("eval", "evaluate a checkpoint on the test split");
  add_data_flags(eval, ec);
  eval->add_option("checkpoint", checkpoint, "checkpoint file (.safetensors)")->required();

  st::PackOptions po;
  std::string pack_in, pack_out;
  CLI::App* pack = app.add_subcommand("pack", "pre-decode ImageNet for --dataset imagenet-packed");
  pack->add_option("--data-dir", pack_in, "ImageNet root (train/, val/)")->required();
  pack->add_option("--out,-o", pack_out, "folder for train.stpack, val.stpack")->required();
  pack->add_option("--pack-size", po.side, "stored shorter side")->capture_default_str();
  pack->add_option("--workers", po.threads, "decoding threads")->capture_default_str();
  pack->add_flag("--overwrite", po.overwrite,
                 "replace train.stpack / val.stpack already in --out (without it, an error)");

  try {
    app.parse(argc, argv);
    for (const std::string& kv : sp_pairs) {
      const size_t eq = kv.find('=');
      if (eq == 0 || eq == std::string::npos || eq + 1 == kv.size())
        throw CLI::ValidationError("--sp", "expected key=value, got '" + kv + "'");
      tc.sparsifier_params[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2 (CLI11's own codes vary).
    return app.exit(e) == 0 ? 0 : 2;
  }
  // The communicator outlives the try block: on an error the handler aborts the MPI job
  // before anything waits on a collective that the failed rank will never join.
  std::unique_ptr<st::Communicator> comm;
  try {
    if (*list) {
      std::fputs((list_json ? st::sparsifiers_json() : st::sparsifiers_listing()).c_str(), stdout);
      return 0;
    }
    if (*pack) {
      std::fputs(st::pack_imagenet(pack_in, pack_out, po).c_str(), stdout);
      return 0;
    }
    const auto given = [&](const char* flag) { return train->count(flag) > 0; };
    // The language model's defaults first; an optimizer's own defaults override them.
    if (*train && tc.arch == "lstm") st::apply_lm_defaults(tc, given);
    if (*train) st::apply_optimizer_defaults(tc, given);
    if (*train && tc.check_flags) {
      st::check_config(tc);
      std::puts("sparsetrain: flags ok");
      return 0;
    }
    comm = st::make_communicator(*train ? tc.comm : ec.comm, *train ? tc.device : ec.device);
    if (*train && !tc.resume.empty()) st::check_checkpoint_file(tc.resume);
    if (*eval) st::check_checkpoint_file(checkpoint);
    if (*train && tc.arch == "lstm") {
      const st::LmResult r = st::train_lm(tc, lm, *comm);
      print_result(r, *comm);
      if (r.interrupted_by) return 128 + r.interrupted_by;
    } else if (*train) {
      const st::TrainResult r = st::train(tc, *comm);
      print_result(r, *comm);
      if (r.interrupted_by) return 128 + r.interrupted_by;
    } else if (*eval && st::is_lm_checkpoint(checkpoint)) {
      if (eval->count("--dataset") == 0) ec.dataset.clear();  // the checkpoint's corpus
      print_result(st::evaluate_lm_checkpoint(ec, checkpoint, *comm), *comm);
    } else if (*eval) {
      print_result(st::evaluate_checkpoint(ec, checkpoint, *comm), *comm);
    }
  } catch (const std::exception& e) {
    // Under mpirun, name the rank and take the whole job down: the other ranks would
    // otherwise wait forever in their next collective.
    if (comm && comm->size() > 1) {
      std::fprintf(stderr, "sparsetrain: error on rank %d of %d: %s\n", comm->rank(), comm->size(),
                   e.what());
      std::fflush(stderr);
      st::MpiCommunicator::abort_job(1);
    }
    std::fprintf(stderr, "sparsetrain: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
