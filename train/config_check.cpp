#include "train/config_check.h"

#include <cmath>
#include <cstdio>

#include "comm/communicator.h"
#include "core/device.h"
#include "core/error.h"
#include "core/kernels/half.h"
#include "core/word_list.h"
#include "data/implicit_feedback.h"
#include "data/registry.h"
#include "data/text_corpus.h"
#include "train/exchange_setup.h"

namespace st {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& x) {
  for (const std::string& s : v)
    if (s == x) return true;
  return false;
}

// 32-bit FNV-1a: enough to tell two flag values apart across ranks.
int32_t fingerprint(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char ch : s) h = (h ^ ch) * 16777619u;
  return static_cast<int32_t>(h);
}

// --precision and --comm-dtype: what each combination can honestly do.
void check_precision(const TrainConfig& c) {
  const Precision p =
      parse_precision(c.precision, flag_label(flag_of(&TrainConfig::precision)).c_str());
  const Precision wire =
      parse_precision(c.comm_dtype, flag_label(flag_of(&TrainConfig::comm_dtype)).c_str());
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

void apply_optimizer_defaults(TrainConfig& c, const FlagGiven& given) {
  if (given(flag_of(&TrainConfig::weight_decay))) return;
  if (c.optimizer == "adam") c.weight_decay = 0.0f;
  if (c.optimizer == "adamw") c.weight_decay = static_cast<float>(kAdamwWeightDecay);
}

void check_config(const TrainConfig& c) {
  const bool lm = c.arch == "lstm", ncf = c.arch == "ncf";
  const std::vector<std::string>& datasets =
      lm ? text_corpus_names() : (ncf ? ncf_dataset_names() : dataset_names());
  ST_CHECK(contains(datasets, c.dataset), "unknown --dataset '", c.dataset, "'",
           lm ? " for --arch lstm" : (ncf ? " for --arch ncf" : ""),
           "; valid: ", word_list(datasets));
  check_flag_ranges(c);
  // -1 asks for a measurement; any other value is the share itself.
  ST_CHECK(c.first_layers_first == -1 || c.first_layers_first >= 0,
           "--first-layers-first must be -1 (measure the share) or a share in [0, 1], got ",
           c.first_layers_first);
  ST_CHECK(c.first_layers_first == -1 || c.forward_overlap,
           "--first-layers-first orders the exchange under --forward-overlap only; add "
           "--forward-overlap or drop --first-layers-first");
  ST_CHECK(c.sparsifier != "none" || c.sparsifier_params.empty(),
           "--sp needs a --sparsifier (got --sp ", format_sparsifier_params(c.sparsifier_params),
           " with --sparsifier none)");
  ST_CHECK(!c.sync_bn || !lm, "--sync-bn applies to models with BatchNorm, not --arch lstm");
  check_exchange_flags(c);
  check_precision(c);
}

void check_same_config_on_all_ranks(const TrainConfig& c, Communicator& comm) {
  if (comm.size() == 1) return;
  const auto fields = agreed_flags(c);
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
