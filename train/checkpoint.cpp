#include "train/checkpoint.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "core/safetensors.h"

namespace st {

namespace {
const char* kOptimizerPrefix = "optimizer.";

// Parses all of `s` with std::from_chars (no locale, no leading space or '+').
template <typename T>
bool parse_whole(const std::string& s, T& out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
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
  f.metadata["format"] = "sparsetrain-checkpoint-1";
  f.metadata["epoch"] = std::to_string(pos.epoch);
  f.metadata["batch"] = std::to_string(pos.batch);
  f.metadata["step"] = std::to_string(pos.step);
  save_safetensors(path, f);
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
                              std::map<std::string, std::string>* meta,
                              const MetadataCheck& check) {
  TensorFile f = load_safetensors(path);
  // The position first: a file with bad metadata leaves the model untouched.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const TrainPosition pos{meta_int(f.metadata, "epoch", path, 0, kMax),
                          meta_int(f.metadata, "batch", path, 0, kMax),
                          meta_int(f.metadata, "step", path, 0, kMax)};
  if (check) check(f.metadata, pos);
  for (Param* p : collect_params(model)) p->value.copy_from(f.get(p->name, p->value.shape(), path));
  for (Buffer* b : collect_buffers(model)) {
    const Tensor& t = f.get(b->name, b->value.shape(), path);
    ST_CHECK(t.dtype() == b->value.dtype(), path, ": tensor '", b->name, "' is ",
             dtype_name(t.dtype()), ", expected ", dtype_name(b->value.dtype()));
    b->value.copy_from(t);
  }
  if (optimizer) {
    std::map<std::string, Tensor> state;
    const std::string prefix = kOptimizerPrefix;
    for (const auto& [name, t] : f.tensors)
      if (name.rfind(prefix, 0) == 0) state[name.substr(prefix.size())] = t;
    optimizer->load_state_dict(state);
  }
  if (meta) *meta = f.metadata;
  return pos;
}

}  // namespace st
