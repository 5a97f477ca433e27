#include "train/flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "comm/communicator.h"
#include "core/error.h"
#include "core/number_text.h"
#include "core/word_list.h"
#include "data/implicit_feedback.h"
#include "data/registry.h"
#include "data/text_corpus.h"
#include "models/registry.h"
#include "train/exchange_setup.h"
#include "train/presets.h"

namespace st {

std::string format_sparsifier_params(const std::map<std::string, std::string>& params) {
  std::string s;
  for (const auto& [key, value] : params) s += (s.empty() ? "" : " ") + key + "=" + value;
  return s;
}

namespace {

// Batch sizes and step counts a checkpoint stores are read back as 32-bit (train/checkpoint.cpp).
constexpr double kMaxInt32 = 2147483647.0;

// What is trained on: the model and the data (`eval` takes them too).
std::vector<FlagRow> data_rows() {
  return {
      {.names = "--arch,-a",
       .field = &TrainConfig::arch,
       .help = "model architecture: " + word_list(model_names()) + ", lstm (language model)",
       .eval_too = true,
       .agree = Agree::value,
       .saved_as = "arch",
       .saved_by = SavedBy::image,  // the language model records its own name
       .on_resume = OnResume::same},
      {.names = "--preset",
       .field = &TrainConfig::preset,
       .help = "a named set of flags, e.g. a paper's language model: " + word_list(preset_names()) +
               " (train/presets.cpp says where each value comes from); a flag given beside "
               "it wins",
       .show_default = false},
      {.names = "--dataset",
       .field = &TrainConfig::dataset,
       .help = "dataset: " + word_list(dataset_names()) +
               "; for --arch lstm: " + word_list(text_corpus_names()) +
               " (fortunes by default); for --arch ncf: " + word_list(ncf_dataset_names()) +
               " (synthetic-ncf by default; movielens reads --data-dir/ratings.csv)",
       .eval_too = true,
       .agree = Agree::value,
       .saved_as = "dataset",
       .on_resume = OnResume::same,
       .lm_default = "fortunes"},
      {.names = "--data-dir",
       .field = &TrainConfig::data_dir,
       .help = std::string("folder with the dataset files (fashion-mnist defaults to ") +
               kDebianFashionMnistDir + ")",
       .show_default = false,
       .eval_too = true,
       .saved_as = "data_dir",
       .saved_by = SavedBy::lm},
      {.names = "--synthetic-size",
       .field = &TrainConfig::synthetic_size,
       .help = "examples per epoch for --dataset synthetic (0 = 50000); users of synthetic-ncf "
               "(0 = 1000)",
       .show_default = false,
       .eval_too = true,
       .range = in_range(0, false, kMaxInt32, false),
       .agree = Agree::value,
       .saved_as = "synthetic_size",
       .saved_by = SavedBy::image,
       .on_resume = OnResume::same_mid_epoch},
      {.names = "--image-size",
       .field = &TrainConfig::image_size,
       .help = "input side in pixels (0 = the model's own)",
       .show_default = false,
       .eval_too = true,
       .range = at_least(0),
       .agree = Agree::value},
      {.names = "--test-subset",
       .field = &TrainConfig::test_subset,
       .help = "use only the first N test examples (0 = all)",
       .show_default = false,
       .eval_too = true,
       .range = at_least(0),
       .agree = Agree::value},
  };
}

// Batch size, threads, device, seed, evaluation (`eval` takes them too).
std::vector<FlagRow> process_rows() {
  return {
      {.names = "-b,--batch-size",
       .field = &TrainConfig::batch_size,
       .help = "mini-batch size per process",
       .eval_too = true,
       .range = in_range(1, false, kMaxInt32, false),
       .agree = Agree::value,
       .saved_as = "batch_size",
       .on_resume = OnResume::same_mid_epoch,
       .lm_default = "20"},
      {.names = "--threads",
       .field = &TrainConfig::threads,
       .help = "CPU threads for compute",
       .eval_too = true,
       .range = at_least(1)},
      {.names = "--workers",
       .field = &TrainConfig::workers,
       .help = "data-loading threads (0 = load inline)",
       .eval_too = true,
       .range = at_least(0)},
      {.names = "--device",
       .field = &TrainConfig::device,
       .help = "cpu, cuda, cuda:N, emu, emu:N (the emulated accelerator: docs/GPU.md) or auto",
       .eval_too = true,
       .agree = Agree::value},
      {.names = "--seed",
       .field = &TrainConfig::seed,
       .help = "seed for initialisation, shuffling and augmentation",
       .eval_too = true,
       .agree = Agree::value,
       .saved_as = "seed",
       .on_resume = OnResume::same_mid_epoch},
      {.names = "--eval-batches",
       .field = &TrainConfig::eval_batches,
       .help = "evaluate on at most this many test batches (0 = all)",
       .show_default = false,
       .eval_too = true,
       .range = at_least(0),
       .agree = Agree::value},
      {.names = "--allow-unknown-tensors",
       .field = &TrainConfig::allow_unknown_tensors,
       .help = "load a checkpoint that holds tensors which are neither this model's nor "
               "trainer state (PyTorch's strict=False); without it they are an error",
       .eval_too = true},
  };
}

// The training split, length, batches per step and the optimiser.
std::vector<FlagRow> optimisation_rows() {
  const TrainConfig d;
  return {
      {.names = "--train-subset",
       .field = &TrainConfig::train_subset,
       .help = "use only the first N training examples (0 = all)",
       .show_default = false,
       .range = at_least(0),
       .agree = Agree::value,
       .saved_as = "train_subset",
       .on_resume = OnResume::same_mid_epoch},
      {.names = "--epochs",
       .field = &TrainConfig::epochs,
       .help = "number of epochs",
       .range = at_least(1),
       .agree = Agree::value,
       .saved_as = "epochs"},
      {.names = "--accum-steps",
       .field = &TrainConfig::accum_steps,
       .help = "micro-batches of -b per optimiser step (gradient accumulation; the exchange "
               "runs once per step, in the last micro-batch's backward)",
       .range = in_range(1, false, kMaxInt32, false),
       .agree = Agree::value,
       .saved_as = "accum_steps",
       .on_resume = OnResume::same_mid_epoch},
      {.names = "--optimizer",
       .field = &TrainConfig::optimizer,
       .help = "sgd, adam or adamw (PyTorch's semantics; adam/adamw take --betas, --eps, and "
               "--wd as L2 (adam) or decoupled decay (adamw, default " +
               number_text(kAdamwWeightDecay) + "))",
       .choices = {"sgd", "adam", "adamw"},
       .agree = Agree::value,
       .saved_as = "optimizer",
       .on_resume = OnResume::same},
      {.names = "--lr",
       .field = &TrainConfig::lr,
       .help = "base learning rate",
       .range = above(0),
       .agree = Agree::value,
       .saved_as = "lr",
       .lm_default = "20"},
      {.names = "--betas",
       .field = BetasField{},
       .help = "adam/adamw: the two decay rates (default " + number_text(d.beta1) + " " +
               number_text(d.beta2) + ")",
       .show_default = false,
       .range = in_range(0, false, 1, true),
       .agree = Agree::value},
      {.names = "--eps",
       .field = &TrainConfig::eps,
       .help = "adam/adamw: epsilon",
       .range = above(0),
       .agree = Agree::value},
      {.names = "--momentum",
       .field = &TrainConfig::momentum,
       .help = "SGD momentum",
       .range = in_range(0, false, 1, true),
       .agree = Agree::value,
       .lm_default = "0"},
  };
}

// Weight decay, the LR schedule, clipping, arithmetic, augmentation, the stop.
std::vector<FlagRow> update_rows() {
  const std::string lm_clip = "0.25";  // the PyTorch word_language_model example's
  return {
      {.names = "--wd,--weight-decay",
       .field = &TrainConfig::weight_decay,
       .help = "weight decay",
       .range = at_least(0),
       .agree = Agree::value,
       .lm_default = "0"},
      {.names = "--nesterov",
       .field = &TrainConfig::nesterov,
       .help = "Nesterov momentum",
       .agree = Agree::value},
      {.names = "--no-wd-bn",
       .field = &TrainConfig::no_wd_on_bn,
       .help = "no weight decay on BatchNorm and bias parameters",
       .agree = Agree::value},
      {.names = "--schedule",
       .field = &TrainConfig::schedule,
       .help = "LR schedule: constant | cosine | multistep (epochs at 50% and 75%) | "
               "multistep:E1,E2[:gamma]",
       .agree = Agree::value,
       .lm_default = "plateau"},
      {.names = "--warmup-epochs",
       .field = &TrainConfig::warmup_epochs,
       .help = "linear LR warm-up epochs (fractional ok)",
       .range = at_least(0),
       .agree = Agree::value},
      {.names = "--clip",
       .field = &TrainConfig::clip,
       .help = "clip the global gradient norm to this (0 = off; --arch lstm: " + lm_clip +
               ", each rank's gradient before the exchange)",
       .show_default = false,
       .range = at_least(0),
       .agree = Agree::value,
       .saved_as = "clip",
       .saved_by = SavedBy::lm,
       .lm_default = lm_clip},
      {.names = "--precision",
       .field = &TrainConfig::precision,
       .help = "Conv2d/Linear arithmetic: fp32, bf16 (oneDNN bf16 kernels on the CPU) or fp16 "
               "(dynamic loss scaling; emulated by rounding on the CPU); weights, BatchNorm "
               "and the loss stay fp32 (docs/PRECISION.md)",
       .agree = Agree::value,
       .saved_as = "precision"},
      {.names = "--comm-dtype",
       .field = &TrainConfig::comm_dtype,
       .help = "format of the dense gradient exchange: fp32, bf16 or fp16 (16-bit values "
               "on the wire, summed in fp32)",
       .agree = Agree::value,
       .saved_as = "comm_dtype"},
      {.names = "--no-augment",
       .field = &TrainConfig::augment,
       .help = "disable training augmentation",
       .inverted = true,
       .agree = Agree::value},
      {.names = "--max-iters",
       .field = &TrainConfig::max_iters,
       .help = "stop after this many steps in total, writing a checkpoint (0 = no limit)",
       .show_default = false,
       .range = at_least(0),
       .agree = Agree::value},
  };
}

// What a run writes and reads: --out, resume, metrics, checkpoints.
std::vector<FlagRow> output_rows() {
  return {
      {.names = "--out,-o",
       .field = &TrainConfig::out,
       .help = "output folder: checkpoint, metrics, config"},
      {.names = "--resume",
       .field = &TrainConfig::resume,
       .help = "checkpoint to continue from (exactly, on CPU)",
       .show_default = false,
       .agree = Agree::given},
      {.names = "--metrics-format", .field = &TrainConfig::metrics_format, .help = "csv or jsonl"},
      {.names = "--log-every",
       .field = &TrainConfig::log_every,
       .help = "iterations between progress lines",
       .range = at_least(1)},
      {.names = "--checkpoint-every",
       .field = &TrainConfig::checkpoint_every,
       .help = "also checkpoint every N iterations (0 = at epoch ends only)",
       .show_default = false,
       .range = at_least(0),
       .agree = Agree::value},
      {.names = "--checkpoint-minutes",
       .field = &TrainConfig::checkpoint_minutes,
       .help = "also checkpoint after this many minutes of wall time (0 = off)",
       .range = at_least(0),
       .agree = Agree::value},
      {.names = "--overwrite",
       .field = &TrainConfig::overwrite,
       .help = "replace the run already in --out (without it, such a folder is an error)"},
      {.names = "--quiet,-q", .field = &TrainConfig::quiet, .help = "no progress lines"},
      {.names = "--check-flags",
       .field = &TrainConfig::check_flags,
       .help = "check the flags and --sp keys as a run does at its start, then exit (0: they "
               "are valid; nothing is read or written)"},
  };
}

// The gradient exchange: backend, buckets, BatchNorm, sparsifier, trace.
std::vector<FlagRow> exchange_rows() {
  return {
      {.names = "--comm",
       .field = &TrainConfig::comm,
       .help = "communication backend: " + word_list(communicator_backends()) +
               " (emu: the emulated accelerator's collective)",
       .choices = communicator_backends(),
       .agree = Agree::value},
      {.names = "--bucket-cap-mb",
       .field = &TrainConfig::bucket_cap_mb,
       .help = "gradient bucket size in MB (huge = one whole-model bucket)",
       .range = above(0),
       .agree = Agree::value,
       .saved_as = "bucket_cap_mb",
       .saved_text = SavedText::shortest},
      {.names = "--first-bucket-mb",
       .field = &TrainConfig::first_bucket_mb,
       .help = "size of the first, small bucket",
       .range = above(0),
       .agree = Agree::value,
       .saved_as = "first_bucket_mb",
       .saved_text = SavedText::shortest},
      {.names = "--print-buckets",
       .field = &TrainConfig::print_buckets,
       .help = "print the gradient bucket plan (buckets, sizes, parameters in ready order)"},
      {.names = "--print-placement",
       .field = &TrainConfig::print_placement,
       .help = "every rank prints its rank, host and node-local rank (which GPU it uses)"},
      {.names = "--summary",
       .field = &TrainConfig::summary,
       .help = "print the model's layers that own parameters, their counts and the total "
               "(as `sparsetrain models --summary`) before training"},
      {.names = "--sync-bn",
       .field = &TrainConfig::sync_bn,
       .help = "BatchNorm batch statistics over all ranks (synchronised), not per rank",
       .agree = Agree::value},
      {.names = "--hierarchy",
       .field = &TrainConfig::hierarchy,
       .help = "two-level exchange: off; node (a dense reduce-scatter inside each host, the "
               "--sparsifier between hosts on each rank's slice, an allgather inside); or N "
               "(every N consecutive ranks form a node) (docs/ALGORITHMS.md)",
       .agree = Agree::value,
       .saved_as = "hierarchy",
       .on_resume = OnResume::same},
      {.names = "--plan",
       .field = &TrainConfig::plan,
       .help = "off, or auto: a probe at start times the links and the --sparsifier, chooses "
               "--bucket-cap-mb, and each bucket goes dense or compressed, whichever is "
               "predicted faster (the plan is printed, saved and kept on resume)",
       .choices = {"off", "auto"},
       .agree = Agree::value,
       .saved_as = "plan",
       .on_resume = OnResume::same},
      {.names = "--no-overlap",
       .field = &TrainConfig::overlap,
       .help = "exchange all buckets after backward instead of during it (baseline)",
       .inverted = true,
       .agree = Agree::value},
      {.names = "--forward-overlap",
       .field = &TrainConfig::forward_overlap,
       .help = "update each bucket as it arrives and start the next forward while later buckets "
               "are in flight, instead of waiting for every bucket at the step's end",
       .agree = Agree::value},
      {.names = "--first-layers-first",
       .field = &TrainConfig::first_layers_first,
       .help = "with forward overlap: the share of the gradient, from the first layers, "
               "exchanged after backward and first layer first (0: in ready order; -1: "
               "1 - backward / exchange, measured over the first steps)",
       .range = in_range(-1, false, 1, false),
       .agree = Agree::value},
      {.names = "--sparsifier",
       .field = &TrainConfig::sparsifier,
       .help = sparsifier_flag_text(),
       .agree = Agree::value,
       .saved_as = "sparsifier"},
      {.names = "--density",
       .field = &TrainConfig::density,
       .help = "target density d (fraction of gradients sent)",
       .range = in_range(0, true, 1, false),
       .agree = Agree::value,
       .saved_as = "density"},
      {.names = "--dense-warmup-iters",
       .field = &TrainConfig::dense_warmup_iters,
       .help = "dense exchanges before sparsification starts",
       .range = at_least(0),
       .agree = Agree::value},
      {.names = "--sp",
       .field = SpPairsField{},
       .help = "sparsifier parameters key=value, e.g. --sp hi=1.2 lo=0.8 (repeatable; "
               "keys per method in `sparsetrain sparsifiers`)",
       .show_default = false,
       .agree = Agree::value,
       .saved_as = "sp"},
      {.names = "--trace",
       .field = &TrainConfig::trace,
       .help = "write a Chrome-trace timeline (Perfetto) of a few iterations to this file",
       .show_default = false,
       .agree = Agree::given},
      {.names = "--trace-iters",
       .field = &TrainConfig::trace_iters,
       .help = "iterations in the trace (after 5 warm-up)",
       .range = at_least(1),
       .agree = Agree::value},
  };
}

// The LSTM language model (--arch lstm).
std::vector<FlagRow> lm_rows() {
  return {
      {.names = "--layers",
       .field = &LmOptions::layers,
       .help = "LSTM layers (--arch lstm)",
       .range = at_least(1),
       .agree = Agree::value,
       .saved_as = "lm_layers",
       .saved_by = SavedBy::lm},
      {.names = "--hidden",
       .field = &LmOptions::hidden,
       .help = "LSTM hidden units (--arch lstm)",
       .range = at_least(1),
       .agree = Agree::value,
       .saved_as = "lm_hidden",
       .saved_by = SavedBy::lm},
      {.names = "--emsize",
       .field = &LmOptions::emsize,
       .help = "word embedding size (--arch lstm)",
       .range = at_least(1),
       .agree = Agree::value,
       .saved_as = "lm_emsize",
       .saved_by = SavedBy::lm},
      {.names = "--bptt",
       .field = &LmOptions::bptt,
       .help = "truncated-BPTT window length (--arch lstm)",
       .range = at_least(1),
       .agree = Agree::value,
       .saved_as = "lm_bptt",
       .saved_by = SavedBy::lm},
      {.names = "--dropout",
       .field = &LmOptions::dropout,
       .help = "dropout probability (--arch lstm)",
       .range = in_range(0, false, 1, true),
       .agree = Agree::value,
       .saved_as = "lm_dropout",
       .saved_by = SavedBy::lm},
      {.names = "--tied",
       .field = &LmOptions::tied,
       .help = "tie the decoder to the embedding (--arch lstm)",
       .agree = Agree::value,
       .saved_as = "lm_tied",
       .saved_by = SavedBy::lm},
  };
}

// The table. Rows follow the order of --help; a field's default is its initialiser in
// train/config.h.
std::vector<FlagRow> make_table() {
  std::vector<FlagRow> table;
  for (auto rows : {data_rows, process_rows, optimisation_rows, update_rows, output_rows,
                    exchange_rows, lm_rows})
    for (FlagRow& row : rows()) table.push_back(std::move(row));
  return table;
}

// "20", "0.25", "plateau" into the field's type (the lm_default column).
template <typename T>
void assign_text(T& field, const std::string& text) {
  if constexpr (std::is_same_v<T, std::string>) {
    field = text;
  } else if constexpr (std::is_same_v<T, bool>) {
    field = text == "1";
  } else if constexpr (std::is_floating_point_v<T>) {
    field = static_cast<T>(std::stod(text));
  } else {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), field);
    ST_CHECK(ec == std::errc() && end == text.data() + text.size(), "not a number: ", text);
  }
}

std::string text_of(double v, const char* format) {
  char buf[40];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// One number against its row's range, with the message the flag has always had.
bool in_flag_range(double x, const FlagRange& r) {
  return std::isfinite(x) && (r.open_min ? x > r.min : x >= r.min) &&
         (r.open_max ? x < r.max : x <= r.max);
}

template <typename T>
void check_number(const std::string& flag, T value, const FlagRange& r) {
  if constexpr (std::is_integral_v<T>) {
    ST_CHECK(value >= static_cast<T>(r.min), flag, " must be at least ", static_cast<T>(r.min),
             ", got ", value);
    ST_CHECK(!std::isfinite(r.max) || static_cast<double>(value) <= r.max, flag,
             " must be at most ", static_cast<int64_t>(r.max), ", got ", value);
  } else {
    const double v = value;
    const bool finite = std::isfinite(v);
    if (std::isfinite(r.max) && !r.open_max) {
      ST_CHECK(finite && (r.open_min ? v > r.min : v >= r.min) && v <= r.max, flag, " must be in ",
               r.open_min ? "(" : "[", r.min, ", ", r.max, "], got ", v);
      return;
    }
    ST_CHECK(finite && (r.open_min ? v > r.min : v >= r.min), flag, " must be ",
             r.open_min ? "greater than " : "at least ", r.min, " and finite, got ", v);
    ST_CHECK(v < r.max, flag, " must be below ", r.max, ", got ", v);
  }
}

void check_row(const FlagRow& row, const TrainConfig& c) {
  const std::string flag = flag_label(row);
  visit_field(row.field, c, [&](const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, BetasField>) {
      const auto in = [&](double b) { return b >= row.range.min && b < row.range.max; };
      ST_CHECK(in(c.beta1) && in(c.beta2), flag, " must be in [", row.range.min, ", ",
               row.range.max, "), got ", c.beta1, " ", c.beta2);
    } else if constexpr (std::is_same_v<T, std::string>) {
      ST_CHECK(row.choices.empty() ||
                   std::find(row.choices.begin(), row.choices.end(), value) != row.choices.end(),
               "unknown ", flag, " '", value, "'; valid: ", word_list(row.choices));
    } else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (row.range.checked()) check_number(flag, value, row.range);
    }
  });
}

// The field's value as text: numbers in `float_format` (printf; null: std::to_string's
// %f), flags as 1 or 0 (1: given), the --sp pairs as "key=value key=value".
std::string field_text(const FlagRow& row, const TrainConfig& c, const char* float_format) {
  const auto number = [&](double v) {
    return float_format ? text_of(v, float_format) : std::to_string(v);
  };
  std::string text;
  visit_field(row.field, c, [&](const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, BetasField>)
      text = number(c.beta1) + " " + number(c.beta2);
    else if constexpr (std::is_same_v<T, SpPairsField>)
      text = format_sparsifier_params(c.sparsifier_params);
    else if constexpr (std::is_same_v<T, std::string>)
      text = value;
    else if constexpr (std::is_same_v<T, bool>)
      text.assign(1, value != row.inverted ? '1' : '0');
    else if constexpr (std::is_floating_point_v<T>)
      text = number(value);
    else
      text = std::to_string(value);
  });
  return text;
}

}  // namespace

std::string saved_number(double v) {
  return text_of(v, kSavedShortest);
}

FlagRange at_least(double min) {
  return {min, false, FlagRange::kUnbounded, false};
}
FlagRange above(double min) {
  return {min, true, FlagRange::kUnbounded, false};
}
FlagRange in_range(double min, bool open_min, double max, bool open_max) {
  return {min, open_min, max, open_max};
}

const std::vector<FlagRow>& train_flags() {
  static const std::vector<FlagRow> table = make_table();
  return table;
}

std::string flag_label(const FlagRow& row) {
  const size_t comma = row.names.find(',');
  if (comma == std::string::npos) return row.names;
  const bool short_first = row.names[1] != '-';
  return short_first ? row.names.substr(0, comma) + "/" + row.names.substr(comma + 1)
                     : row.names.substr(0, comma);
}

const FlagRow& flag_of(const FlagField& field) {
  for (const FlagRow& row : train_flags())
    if (row.field == field) return row;
  ST_THROW("no flag sets this TrainConfig field (train/flags.cpp)");
}

const FlagRow& flag_named(const std::string& name) {
  for (const FlagRow& row : train_flags()) {
    const std::string names = "," + row.names + ",";
    if (names.find("," + name + ",") != std::string::npos) return row;
  }
  ST_THROW("no flag named ", name, " (train/flags.cpp)");
}

void set_flag_text(TrainConfig& c, const FlagRow& row, const std::string& text) {
  visit_field(row.field, c, [&](auto& field) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      try {
        assign_text(field, text);
      } catch (const std::exception&) {
        ST_THROW(flag_label(row), ": '", text, "' is not a value of this flag");
      }
    } else {
      ST_THROW(flag_label(row), " cannot be set from one text value");
    }
  });
}

std::string flag_value_text(const FlagRow& row, const TrainConfig& c) {
  if (row.agree == Agree::given) {
    bool empty = true;
    visit_field(row.field, c, [&](const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>)
        empty = value.empty();
    });
    return empty ? "0" : "1";
  }
  return field_text(row, c, "%.17g");
}

void apply_lm_defaults(TrainConfig& c, const FlagGiven& given) {
  for (const FlagRow& row : train_flags()) {
    if (row.lm_default.empty() || given(row)) continue;
    visit_field(row.field, c, [&](auto& field) {
      using T = std::decay_t<decltype(field)>;
      if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>)
        assign_text(field, row.lm_default);
    });
  }
}

void check_lm_only_flags(const TrainConfig& c, const FlagGiven& given) {
  if (c.arch == "lstm") return;
  for (const FlagRow& row : train_flags()) {
    const bool lm_only = std::visit(
        [](auto member) {
          using M = decltype(member);
          if constexpr (std::is_same_v<M, BetasField> || std::is_same_v<M, SpPairsField>)
            return false;
          else
            return std::is_invocable_v<M, const LmOptions&>;
        },
        row.field);
    ST_CHECK(!lm_only || !given(row), flag_label(row), " applies to --arch lstm only, not --arch ",
             c.arch);
  }
}

void check_flag_ranges(const TrainConfig& c) {
  for (const FlagRow& row : train_flags()) check_row(row, c);
}

std::vector<std::pair<std::string, std::string>> agreed_flags(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const FlagRow& row : train_flags())
    if (row.agree != Agree::no) out.emplace_back(flag_label(row), flag_value_text(row, c));
  return out;
}

std::map<std::string, std::string> flag_metadata(const TrainConfig& c, SavedBy task) {
  std::map<std::string, std::string> meta;
  for (const FlagRow& row : train_flags()) {
    if (row.saved_as.empty() ||
        (static_cast<unsigned>(row.saved_by) & static_cast<unsigned>(task)) == 0)
      continue;
    meta[row.saved_as] =
        field_text(row, c, row.saved_text == SavedText::shortest ? kSavedShortest : nullptr);
  }
  return meta;
}

void check_resumed_flags(const std::string& checkpoint,
                         const std::map<std::string, std::string>& saved,
                         const std::map<std::string, std::string>& now, const TrainPosition& pos,
                         const std::string& mid_epoch_hint) {
  for (const FlagRow& row : train_flags()) {
    // A saved value outside the flag's range was written by another version or edited.
    if (const auto v = saved.find(row.saved_as);
        !row.saved_as.empty() && v != saved.end() && row.range.checked()) {
      char* end = nullptr;
      const double x = std::strtod(v->second.c_str(), &end);
      ST_CHECK(end != v->second.c_str() && *end == '\0' && in_flag_range(x, row.range), checkpoint,
               ": checkpoint metadata '", row.saved_as, "' is '", v->second, "', outside ",
               flag_label(row), "'s range");
    }
    if (row.on_resume == OnResume::free) continue;
    const auto a = saved.find(row.saved_as), b = now.find(row.saved_as);
    if (a == saved.end() || b == now.end() || a->second == b->second) continue;
    const std::string flag = flag_label(row);
    ST_CHECK(row.on_resume != OnResume::same, checkpoint, ": the checkpoint was trained with ",
             flag, " ", a->second, ", not ", b->second);
    ST_CHECK(pos.batch == 0, checkpoint, ": a mid-epoch checkpoint with ", flag, " ", a->second,
             " resumes only with the same ", flag, ", not ", b->second, mid_epoch_hint);
  }
}

}  // namespace st
