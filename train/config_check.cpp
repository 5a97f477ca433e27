#include "train/config_check.h"

#include <cmath>
#include <cstdio>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/error.h"
#include "core/kernels/half.h"
#include "data/registry.h"
#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/registry.h"
#include "train/train_common.h"

namespace st {

namespace {

// The language model's corpora (train/lm_trainer.cpp opens them).
const std::vector<std::string> kTextDatasets = {"fortunes", "ptb", "wikitext2", "wikitext-2",
                                                "text"};

template <typename T>
void check_at_least(const char* flag, T value, T min) {
  ST_CHECK(value >= min, flag, " must be at least ", min, ", got ", value);
}

void check_finite(const char* flag, double value, double min, bool strict = false) {
  ST_CHECK(std::isfinite(value) && (strict ? value > min : value >= min), flag, " must be ",
           strict ? "greater than " : "at least ", min, " and finite, got ", value);
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  for (const std::string& s : v)
    if (s == x) return true;
  return false;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// 32-bit FNV-1a: enough to tell two flag values apart across ranks.
int32_t fingerprint(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char ch : s) h = (h ^ ch) * 16777619u;
  return static_cast<int32_t>(h);
}

// A sparsified exchange on a CUDA bucket runs the method's device forms (bulk::Ops); a
// method without them is refused here, at start, in one line, never mid-run.
void check_sparsifier_device(const TrainConfig& c) {
  const bool cuda =
      c.device.rfind("cuda", 0) == 0 || (c.device == "auto" && cuda_device_count() > 0);
  if (c.sparsifier == "none" || !cuda) return;
  // Without a device the device line comes first (parse_device), as for a dense run.
  ST_CHECK(cuda_device_count() == 0 || bulk::cuda_ops_built(), "--sparsifier ", c.sparsifier,
           " on --device ", c.device,
           ": this build has no CUDA implementation of the sparsifiers' bulk passes "
           "(sparsify/bulk/core_cuda.cu); train with --device cpu or without --sparsifier");
}

// --precision and --comm-dtype: what each combination can honestly do.
void check_precision(const TrainConfig& c) {
  const Precision p = parse_precision(c.precision, "--precision");
  const Precision wire = parse_precision(c.comm_dtype, "--comm-dtype");
  ST_CHECK(p == Precision::F32 || c.arch != "lstm", "--precision ", c.precision,
           " applies to the image models (Conv2d and Linear layers); --arch lstm trains in fp32");
  // An overflowed fp16 step is skipped, but a sparsifier would already have put its inf
  // into the error-feedback residuals.
  ST_CHECK(p != Precision::F16 || c.sparsifier == "none",
           "--precision fp16 (loss scaling) "
           "needs the dense exchange; --sparsifier ",
           c.sparsifier, " would keep an overflowed step's inf in its residuals");
  ST_CHECK(wire == Precision::F32 || c.sparsifier == "none", "--comm-dtype ", c.comm_dtype,
           " sets the dense exchange's format; --sparsifier ", c.sparsifier,
           " has its own (use --comm-dtype fp32)");
}

}  // namespace

void apply_optimizer_defaults(TrainConfig& c, const std::function<bool(const char*)>& given) {
  if (given("--wd")) return;
  if (c.optimizer == "adam") c.weight_decay = 0.0f;
  if (c.optimizer == "adamw") c.weight_decay = 0.01f;
}

void check_config(const TrainConfig& c) {
  const bool lm = c.arch == "lstm";
  const std::vector<std::string>& datasets = lm ? kTextDatasets : dataset_names();
  ST_CHECK(contains(datasets, c.dataset), "unknown --dataset '", c.dataset, "'",
           lm ? " for --arch lstm" : "", "; valid: ", join(datasets));
  check_at_least<int64_t>("--epochs", c.epochs, 1);
  check_at_least<int64_t>("-b/--batch-size", c.batch_size, 1);
  check_at_least<int64_t>("--accum-steps", c.accum_steps, 1);
  check_at_least<int64_t>("--train-subset", c.train_subset, 0);
  check_at_least<int64_t>("--test-subset", c.test_subset, 0);
  check_at_least<int64_t>("--synthetic-size", c.synthetic_size, 0);
  check_at_least<int>("--image-size", c.image_size, 0);
  ST_CHECK(c.optimizer == "sgd" || c.optimizer == "adam" || c.optimizer == "adamw",
           "unknown --optimizer '", c.optimizer, "'; valid: sgd, adam, adamw");
  ST_CHECK(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1,
           "--betas must be in [0, 1), got ", c.beta1, " ", c.beta2);
  check_finite("--eps", c.eps, 0.0, true);
  check_finite("--lr", c.lr, 0.0, true);
  check_finite("--momentum", c.momentum, 0.0);
  ST_CHECK(c.momentum < 1.0f, "--momentum must be below 1, got ", c.momentum);
  check_finite("--wd", c.weight_decay, 0.0);
  check_finite("--warmup-epochs", c.warmup_epochs, 0.0);
  check_finite("--clip", c.clip, 0.0);
  check_at_least<int>("--threads", c.threads, 1);
  check_at_least<int>("--workers", c.workers, 0);
  check_at_least<int64_t>("--max-iters", c.max_iters, 0);
  check_at_least<int64_t>("--log-every", c.log_every, 1);
  check_at_least<int64_t>("--checkpoint-every", c.checkpoint_every, 0);
  check_finite("--checkpoint-minutes", c.checkpoint_minutes, 0.0);
  check_at_least<int64_t>("--eval-batches", c.eval_batches, 0);
  check_finite("--bucket-cap-mb", c.bucket_cap_mb, 0.0, true);
  check_finite("--first-bucket-mb", c.first_bucket_mb, 0.0, true);
  check_at_least<int64_t>("--trace-iters", c.trace_iters, 1);
  ST_CHECK(std::isfinite(c.density) && c.density > 0 && c.density <= 1,
           "--density must be in (0, 1], got ", c.density);
  check_at_least<int64_t>("--dense-warmup-iters", c.dense_warmup_iters, 0);
  ST_CHECK(c.sparsifier != "none" || c.sparsifier_params.empty(),
           "--sp needs a --sparsifier (got --sp ", format_sparsifier_params(c.sparsifier_params),
           " with --sparsifier none)");
  ST_CHECK(!c.sync_bn || !lm, "--sync-bn applies to models with BatchNorm, not --arch lstm");
  // The emulated accelerator runs the device exchange (ctest emu_hook), not yet layers.
  ST_CHECK(c.device.rfind("emu", 0) != 0, "--device ", c.device,
           ": the emulated accelerator runs the sparsified exchange's device tests (ctest -R "
           "emu_hook); layers and the optimiser do not run on it yet: train with --device cpu "
           "or cuda");
  check_sparsifier_device(c);
  check_precision(c);
  // --sp keys and values as the exchange hook reads them, before any data is loaded.
  std::shared_ptr<SparsifyHook> hook;
  if (c.sparsifier != "none") make_exchange_hook(c, hook);
}

std::vector<std::pair<std::string, std::string>> config_fields(const TrainConfig& c) {
  auto b = [](bool v) { return std::string(v ? "1" : "0"); };
  return {{"--arch", c.arch},
          {"--dataset", c.dataset},
          {"--synthetic-size", std::to_string(c.synthetic_size)},
          {"--image-size", std::to_string(c.image_size)},
          {"--train-subset", std::to_string(c.train_subset)},
          {"--test-subset", std::to_string(c.test_subset)},
          {"--epochs", std::to_string(c.epochs)},
          {"-b/--batch-size", std::to_string(c.batch_size)},
          {"--accum-steps", std::to_string(c.accum_steps)},
          {"--optimizer", c.optimizer},
          {"--lr", number(c.lr)},
          {"--betas", number(c.beta1) + " " + number(c.beta2)},
          {"--eps", number(c.eps)},
          {"--momentum", number(c.momentum)},
          {"--wd", number(c.weight_decay)},
          {"--nesterov", b(c.nesterov)},
          {"--no-wd-bn", b(c.no_wd_on_bn)},
          {"--schedule", c.schedule},
          {"--warmup-epochs", number(c.warmup_epochs)},
          {"--clip", number(c.clip)},
          {"--precision", c.precision},
          {"--comm-dtype", c.comm_dtype},
          {"--no-augment", b(!c.augment)},
          {"--seed", std::to_string(c.seed)},
          {"--max-iters", std::to_string(c.max_iters)},
          {"--device", c.device},
          {"--resume", b(!c.resume.empty())},
          {"--checkpoint-every", std::to_string(c.checkpoint_every)},
          {"--checkpoint-minutes", number(c.checkpoint_minutes)},
          {"--eval-batches", std::to_string(c.eval_batches)},
          {"--comm", c.comm},
          {"--bucket-cap-mb", number(c.bucket_cap_mb)},
          {"--first-bucket-mb", number(c.first_bucket_mb)},
          {"--no-overlap", b(!c.overlap)},
          {"--trace", b(!c.trace.empty())},
          {"--trace-iters", std::to_string(c.trace_iters)},
          {"--sync-bn", b(c.sync_bn)},
          {"--sparsifier", c.sparsifier},
          {"--density", number(c.density)},
          {"--dense-warmup-iters", std::to_string(c.dense_warmup_iters)},
          {"--sp", format_sparsifier_params(c.sparsifier_params)}};
}

void check_same_config_on_all_ranks(const TrainConfig& c, Communicator& comm) {
  if (comm.size() == 1) return;
  const auto fields = config_fields(c);
  const int64_t n = static_cast<int64_t>(fields.size());
  std::vector<int32_t> mine;
  for (const auto& field : fields) mine.push_back(fingerprint(field.second));
  Tensor all = Tensor::zeros({comm.size() * n}, DType::I32);
  comm.allgather(Tensor::from_vector_i32(mine, {n}), all);
  const int32_t* rank0 = all.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    ST_CHECK(rank0[i] == mine[static_cast<size_t>(i)], "rank ", comm.rank(), " was started with ",
             fields[static_cast<size_t>(i)].first, " '", fields[static_cast<size_t>(i)].second,
             "', which differs from rank 0's; every rank needs the same flags");
}

}  // namespace st
