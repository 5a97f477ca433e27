#include "train/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "core/error.h"
#include "core/safetensors.h"

namespace st {

namespace {
const char* kOptimizerPrefix = "optimizer.";
const char* kFormat = "sparsetrain-checkpoint-1";
// How many optimiser state tensors the writer saved: a missing one is refused, not
// started from zero.
const char* kOptimizerTensors = "optimizer_tensors";
// Tensors a training checkpoint holds beside the model: the optimiser's state, the
// exchange hook's rows (train/sparsify_checkpoint.cpp) and the language model's carried
// LSTM state (train/lm_trainer.cpp).
const char* const kTrainerPrefixes[] = {kOptimizerPrefix, "sparsify.", "lm_state."};

// Parses all of `s` with std::from_chars (no locale, no leading space or '+').
template <typename T>
bool parse_whole(const std::string& s, T& out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
}

std::string quote(const std::string& name) {
  return nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The run's settings as the training loop records them, where present (older files lack
// some): the ranges the flags allow, known names, the format this build writes.
void check_run_metadata(const std::map<std::string, std::string>& meta, const std::string& path) {
  if (auto it = meta.find("format"); it != meta.end())
    ST_CHECK(it->second == kFormat, path, ": checkpoint format '", it->second,
             "' is not one this build reads (", kFormat, ")");
  constexpr int64_t kInt32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Range {
    const char* key;
    int64_t lo, hi;
  };
  const Range ranges[] = {{"world_size", 1, int64_t{1} << 24}, {"batch_size", 1, kInt32},
                          {"accum_steps", 1, kInt32},          {"epochs", 1, kMax},
                          {"synthetic_size", 0, kMax},         {"train_subset", 0, kMax},
                          {kOptimizerTensors, 0, kInt32}};
  for (const Range& r : ranges)
    if (meta.count(r.key)) meta_int(meta, r.key, path, r.lo, r.hi);
  for (const char* key : {"precision", "comm_dtype"}) {
    auto it = meta.find(key);
    ST_CHECK(
        it == meta.end() || it->second == "fp32" || it->second == "bf16" || it->second == "fp16",
        path, ": checkpoint metadata '", key, "' is '", it->second,
        "', expected fp32, bf16 or fp16");
  }
  if (meta.count("density")) {
    const double d = meta_double(meta, "density", path);
    ST_CHECK(d > 0 && d <= 1, path, ": checkpoint metadata 'density' is ", d,
             ", expected a number in (0, 1]");
  }
}

// PyTorch's strict load: every tensor of the file belongs to the model or to the
// trainer's state; anything else is refused unless the caller allows it.
void check_known_tensors(const TensorFile& f, Layer& model, const std::string& path,
                         bool allow_unknown) {
  if (allow_unknown) return;
  std::set<std::string> known;
  for (Param* p : collect_params(model)) known.insert(p->name);
  for (Buffer* b : collect_buffers(model)) known.insert(b->name);
  for (const auto& [name, t] : f.tensors) {
    bool ours = known.count(name) > 0;
    for (const char* prefix : kTrainerPrefixes) ours = ours || name.rfind(prefix, 0) == 0;
    ST_CHECK(ours, path, ": tensor ", quote(name),
             " is neither a parameter or buffer of this model nor trainer state (pass "
             "--allow-unknown-tensors to ignore such tensors)");
  }
}

// `t` must have the shape and type of `like`.
const Tensor& expect_like(const TensorFile& f, const std::string& name, const Tensor& like,
                          const std::string& path) {
  const Tensor& t = f.get(name, like.shape(), path);
  ST_CHECK(t.dtype() == like.dtype(), path, ": tensor ", quote(name), " is ", dtype_name(t.dtype()),
           ", expected ", dtype_name(like.dtype()));
  return t;
}

// The optimiser's tensors of the file, by state key; as many as the writer saved.
std::map<std::string, Tensor> optimizer_state(const TensorFile& f, const std::string& path) {
  std::map<std::string, Tensor> state;
  const std::string prefix = kOptimizerPrefix;
  for (const auto& [name, t] : f.tensors)
    if (name.rfind(prefix, 0) == 0) state[name.substr(prefix.size())] = t;
  if (f.metadata.count(kOptimizerTensors)) {
    const int64_t saved = meta_int(f.metadata, kOptimizerTensors, path);
    const auto held = static_cast<int64_t>(state.size());
    ST_CHECK(saved == held, path, ": the checkpoint was written with ", saved,
             " optimizer state tensors but holds ", held,
             saved > held ? " (a missing momentum buffer would restart at zero)" : "");
  }
  return state;
}

}  // namespace

const std::string& meta_string(const std::map<std::string, std::string>& meta,
                               const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  ST_CHECK(it != meta.end(), path, ": checkpoint metadata lacks '", key, "'");
  return it->second;
}

int64_t meta_int(const std::map<std::string, std::string>& meta, const std::string& key,
                 const std::string& path, int64_t lo, int64_t hi) {
  const std::string& s = meta_string(meta, key, path);
  int64_t v = 0;
  ST_CHECK(parse_whole(s, v), path, ": checkpoint metadata '", key, "' is '", s,
           "', expected an integer");
  ST_CHECK(v >= lo && v <= hi, path, ": checkpoint metadata '", key, "' is ", v,
           ", expected an integer in [", lo, ", ", hi, "]");
  return v;
}

double meta_double(const std::map<std::string, std::string>& meta, const std::string& key,
                   const std::string& path) {
  const std::string& s = meta_string(meta, key, path);
  double v = 0;
  ST_CHECK(parse_whole(s, v), path, ": checkpoint metadata '", key, "' is '", s,
           "', expected a number");
  return v;
}

std::vector<std::pair<std::string, Tensor>> checkpoint_tensors(
    Layer& model, const Optimizer* optimizer,
    const std::vector<std::pair<std::string, Tensor>>& extra) {
  std::vector<std::pair<std::string, Tensor>> all;
  for (Param* p : collect_params(model)) all.emplace_back(p->name, p->value);
  for (Buffer* b : collect_buffers(model)) all.emplace_back(b->name, b->value);
  if (optimizer)
    for (const auto& [name, t] : optimizer->state_dict())
      all.emplace_back(kOptimizerPrefix + name, t);
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

std::string first_non_finite(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  for (const auto& [name, t] : tensors) {
    if (t.dtype() != DType::F32) continue;
    const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
    const float* v = host.f32();
    const int64_t n = host.numel();
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(v[i])) return name;
  }
  return "";
}

void save_checkpoint(const std::string& path, Layer& model, const Optimizer* optimizer,
                     const TrainPosition& pos, const std::map<std::string, std::string>& meta,
                     const std::vector<std::pair<std::string, Tensor>>& extra) {
  TensorFile f;
  f.tensors = checkpoint_tensors(model, optimizer, extra);
  const std::string bad = first_non_finite(f.tensors);
  ST_CHECK(bad.empty(), path, ": not written: tensor '", bad,
           "' holds NaN or inf (a previous checkpoint there is kept)");
  f.metadata = meta;
  f.metadata["format"] = kFormat;
  f.metadata[kOptimizerTensors] =
      std::to_string(optimizer ? optimizer->state_dict().size() : size_t{0});
  f.metadata["epoch"] = std::to_string(pos.epoch);
  f.metadata["batch"] = std::to_string(pos.batch);
  f.metadata["step"] = std::to_string(pos.step);
  save_safetensors(path, f);
}

void check_checkpoint_file(const std::string& path) {
  ST_CHECK(!std::filesystem::is_directory(path), path, " is a directory (did you mean ",
           (std::filesystem::path(path) / "checkpoint.safetensors").string(), "?)");
}

std::string epoch_end_path(const std::string& checkpoint_path) {
  return (std::filesystem::path(checkpoint_path).parent_path() / "epoch_end.safetensors").string();
}

void copy_checkpoint(const std::string& from, const std::string& to) {
  const std::string tmp = to + ".tmp";
  std::error_code ec;
  std::filesystem::copy_file(from, tmp, std::filesystem::copy_options::overwrite_existing, ec);
  if (!ec) std::filesystem::rename(tmp, to, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    ST_THROW("copying checkpoint ", from, " to ", to, ": ", ec.message());
  }
}

TrainPosition load_checkpoint(const std::string& path, Layer& model, Optimizer* optimizer,
                              std::map<std::string, std::string>* meta, const MetadataCheck& check,
                              bool allow_unknown_tensors) {
  check_checkpoint_file(path);
  TensorFile f = load_safetensors(path);
  // The position and the run's settings first: a file with bad metadata leaves the model
  // untouched.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // Evaluating needs the weights only: a file of another writer (PyTorch's save_file,
  // with --arch) has no position, and a resume needs one.
  const bool weights_only = !optimizer && !meta && !check;
  const bool positioned = !weights_only || f.metadata.count("epoch") || f.metadata.count("batch") ||
                          f.metadata.count("step");
  const TrainPosition pos = positioned ? TrainPosition{meta_int(f.metadata, "epoch", path, 0, kMax),
                                                       meta_int(f.metadata, "batch", path, 0, kMax),
                                                       meta_int(f.metadata, "step", path, 0, kMax)}
                                       : TrainPosition{};
  check_run_metadata(f.metadata, path);
  check_known_tensors(f, model, path, allow_unknown_tensors);
  if (check) check(f.metadata, pos);
  const std::vector<Param*> params = collect_params(model);
  const std::vector<Buffer*> buffers = collect_buffers(model);
  // Every tensor is checked before the first one is copied.
  for (Param* p : params) expect_like(f, p->name, p->value, path);
  for (Buffer* b : buffers) expect_like(f, b->name, b->value, path);
  const std::map<std::string, Tensor> state =
      optimizer ? optimizer_state(f, path) : std::map<std::string, Tensor>{};
  for (Param* p : params) p->value.copy_from(*f.find(p->name));
  for (Buffer* b : buffers) b->value.copy_from(*f.find(b->name));
  if (optimizer) {
    try {
      optimizer->load_state_dict(state);
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());  // the optimiser names the key, this the file
    }
  }
  if (meta) *meta = f.metadata;
  return pos;
}

}  // namespace st
