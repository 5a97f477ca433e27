#include "models/summary.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/word_list.h"
#include "layers/forward_watch.h"
#include "layers/sequential.h"

namespace st {

namespace {

// Text padded with spaces to `width`, on the left (numbers) or the right (words).
std::string padded(const std::string& text, size_t width, bool right_align) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return right_align ? fill + text : text + fill;
}

std::string image_text(int64_t image_size) {
  if (image_size <= 0) return "-";  // a registered row that leaves the size to the dataset
  return std::to_string(image_size) + "x" + std::to_string(image_size);
}

// What a row takes: an image size, or a language model's vocabulary.
std::string input_text(const ArchCount& r) {
  return r.preset.empty() ? image_text(r.info.image_size) : with_thousands(r.vocab) + " words";
}

// The description column: a language model's row starts with the --preset that builds it.
std::string description_text(const ArchCount& r) {
  return r.preset.empty() ? r.info.description : "--preset " + r.preset + ": " + r.info.description;
}

// "MaxPool2d(k2, s2)" -> "MaxPool2d": the kind of a layer, for the note on those left out.
std::string kind_of(const std::string& description) {
  return description.substr(0, description.find('('));
}

}  // namespace

std::string with_thousands(int64_t n) {
  // The magnitude as unsigned, which also holds INT64_MIN's.
  const uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  const std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

ArchCount count_arch(const std::string& arch, int64_t classes, int64_t channels) {
  ST_CHECK(classes > 0, "count_arch(", arch, "): classes must be positive, got ", classes);
  ST_CHECK(channels > 0, "count_arch(", arch, "): channels must be positive, got ", channels);
  const ArchInfo info = arch_info(arch);  // a copy: the row outlives the registry's storage
  Rng rng(0);                             // the values do not matter, only how many there are
  LayerPtr model = make_model(arch, classes, channels, rng);
  ArchCount row;
  row.info = info;
  row.classes = classes;
  row.channels = channels;
  row.params = count_params(*model);
  return row;
}

std::vector<ArchCount> count_archs(int64_t classes, int64_t channels) {
  std::vector<ArchCount> rows;
  // Names first: a row's ArchInfo reference may move if the table grows meanwhile.
  for (const std::string& name : model_names()) rows.push_back(count_arch(name, classes, channels));
  return rows;
}

std::string models_listing(const std::vector<ArchCount>& rows) {
  const std::string head_name = "arch", head_params = "params", head_input = "input";
  size_t name_w = head_name.size(), params_w = head_params.size(), input_w = head_input.size();
  for (const ArchCount& r : rows) {
    name_w = std::max(name_w, r.info.name.size());
    params_w = std::max(params_w, with_thousands(r.params).size());
    input_w = std::max(input_w, input_text(r).size());
  }
  auto line = [&](const std::string& name, const std::string& params, const std::string& input,
                  const std::string& description) {
    return padded(name, name_w, false) + "  " + padded(params, params_w, true) + "  " +
           padded(input, input_w, false) + "  " + description + "\n";
  };
  std::string out;
  if (!rows.empty())
    out += std::to_string(rows.front().classes) + " classes, " +
           std::to_string(rows.front().channels) +
           " input channels, each architecture at its natural input size (language models "
           "at their paper's vocabulary)\n";
  out += line(head_name, head_params, head_input, "description");
  for (const ArchCount& r : rows)
    out += line(r.info.name, with_thousands(r.params), input_text(r), description_text(r));
  return out;
}

std::string models_json(const std::vector<ArchCount>& rows) {
  std::string out;
  for (const ArchCount& r : rows) {
    nlohmann::ordered_json row = {
        {"name", r.info.name}, {"params", r.params}, {"image_size", r.info.image_size}};
    if (r.preset.empty()) {
      row["classes"] = r.classes;
      row["channels"] = r.channels;
    } else {
      row["preset"] = r.preset;
      row["vocab"] = r.vocab;
    }
    row["description"] = r.info.description;
    out += row.dump() + "\n";
  }
  return out;
}

int64_t multiply_adds(Layer& layer, const Shape& y) {
  if (y.rank() == 0) return 0;
  // Positions each parameter element is used at: every output pixel for a convolution
  // (torchinfo tests for "Conv" in the class name), every example for any other layer.
  const bool conv = kind_of(layer.describe()).find("Conv") != std::string::npos;
  int64_t uses = y[0];
  if (conv)
    for (int d = 2; d < y.rank(); ++d) uses *= y[d];
  int64_t macs = 0;
  layer.visit_params("", [&](const std::string&, Param& p) { macs += p.value.numel() * uses; });
  return macs;
}

namespace {

bool is_leaf(Layer& layer) {
  return dynamic_cast<Container*>(&layer) == nullptr;
}

bool owns_params(Layer& layer) {
  bool owns = false;
  layer.visit_params("", [&](const std::string&, Param&) { owns = true; });
  return owns;
}

// Whether every parameter of `model` lives in CPU memory (a forward there needs nothing else).
bool on_cpu(Layer& model) {
  bool cpu = true;
  model.visit_params("",
                     [&](const std::string&, Param& p) { cpu = cpu && p.value.device().is_cpu(); });
  return cpu;
}

// Each leaf's output shape in one evaluation-mode forward of zeros shaped `input`.
std::map<const Layer*, Shape> output_shapes(Layer& model, const Shape& input) {
  std::map<const Layer*, Shape> shapes;
  // The model's mode comes back also when the forward throws (an input it cannot take).
  struct EvalMode {
    Layer& model;
    const bool was_training = model.training();
    explicit EvalMode(Layer& m) : model(m) { model.set_training(false); }
    ~EvalMode() { model.set_training(was_training); }
  } eval_mode(model);
  ForwardWatch watch([&](const Layer& layer, const Tensor& y) { shapes[&layer] = y.shape(); });
  model.forward(Tensor::zeros(input));
  return shapes;
}

}  // namespace

std::vector<LayerRow> layer_rows(Layer& model, const Shape& input) {
  // Full names from the model itself (without writing them into the parameters, which a
  // running model's reducer may be reading).
  std::map<const Param*, std::string> full_names;
  model.visit_params("", [&](const std::string& name, Param& p) { full_names.emplace(&p, name); });
  const std::map<const Layer*, Shape> shapes =
      input.rank() > 0 ? output_shapes(model, input) : std::map<const Layer*, Shape>{};
  std::vector<LayerRow> rows;
  model.visit_layers([&](Layer& layer) {
    if (!is_leaf(layer) || !owns_params(layer)) return;  // a container's children come next
    LayerRow row{"", layer.describe(), 0};
    bool first = true;
    layer.visit_params("", [&](const std::string& local, Param& p) {
      const auto it = full_names.find(&p);
      if (first && it != full_names.end() && it->second.size() >= local.size()) {
        row.path = it->second.substr(0, it->second.size() - local.size());
        if (!row.path.empty() && row.path.back() == '.') row.path.pop_back();
      }
      row.params += p.value.numel();
      first = false;
    });
    if (const auto it = shapes.find(&layer); it != shapes.end()) {
      row.output = it->second;
      row.macs = multiply_adds(layer, it->second);
    }
    rows.push_back(std::move(row));
  });
  return rows;
}

namespace {

// The kinds of parameter-free leaves (left out of the table) and how many there are.
std::pair<size_t, std::vector<std::string>> left_out_kinds(Layer& model) {
  size_t left_out = 0;
  std::set<std::string> kinds_seen;
  std::vector<std::string> kinds;  // in first-seen order
  model.visit_layers([&](Layer& layer) {
    if (!is_leaf(layer) || owns_params(layer)) return;
    ++left_out;
    const std::string kind = kind_of(layer.describe());
    if (kinds_seen.insert(kind).second) kinds.push_back(kind);
  });
  return {left_out, kinds};
}

}  // namespace

std::string layer_table(Layer& model, const std::string& title, const Shape& input) {
  const bool shaped = input.rank() > 0 && on_cpu(model);
  const std::vector<LayerRow> rows = layer_rows(model, shaped ? input : Shape{});
  const int64_t total = count_params(model);
  int64_t total_macs = 0;
  for (const LayerRow& r : rows) total_macs += r.macs;
  const std::string head_path = "layer", head_type = "type", head_out = "output",
                    head_params = "params", head_macs = "mult-adds";
  size_t path_w = head_path.size(), type_w = head_type.size(), out_w = head_out.size();
  size_t params_w = std::max(head_params.size(), with_thousands(total).size());
  size_t macs_w = std::max(head_macs.size(), with_thousands(total_macs).size());
  for (const LayerRow& r : rows) {
    path_w = std::max(path_w, r.path.empty() ? 6 : r.path.size());
    type_w = std::max(type_w, r.type.size());
    out_w = std::max(out_w, r.output.str().size());
  }
  auto line = [&](const std::string& path, const std::string& type, const std::string& out,
                  const std::string& params, const std::string& macs) {
    std::string text = padded(path, path_w, false) + "  " + padded(type, type_w, false) + "  ";
    if (shaped) text += padded(out, out_w, false) + "  ";
    text += padded(params, params_w, true);
    if (shaped) text += "  " + padded(macs, macs_w, true);
    // Trailing spaces of an empty last column are dropped.
    return text.substr(0, text.find_last_not_of(' ') + 1) + "\n";
  };
  std::string out = title + "\n" + line(head_path, head_type, head_out, head_params, head_macs);
  for (const LayerRow& r : rows)
    out += line(r.path.empty() ? "(root)" : r.path, r.type, r.output.str(),
                with_thousands(r.params), with_thousands(r.macs));
  out += line("total", "", "", with_thousands(total), with_thousands(total_macs));
  const auto [left_out, kinds] = left_out_kinds(model);
  if (left_out > 0) {
    out += std::to_string(left_out) + " layers without parameters not listed (" + word_list(kinds) +
           ")\n";
  }
  if (shaped)
    out += "output shapes and multiply-adds for an input of " + input.str() +
           " (counted as torchinfo does: parameter-free layers 0)\n";
  else if (input.rank() > 0)
    out += "no output shapes: they come from a forward on the CPU, and the model is not there\n";
  return out;
}

std::string arch_summary(const std::string& arch, int64_t classes, int64_t channels) {
  ST_CHECK(classes > 0, "arch_summary(", arch, "): classes must be positive, got ", classes);
  ST_CHECK(channels > 0, "arch_summary(", arch, "): channels must be positive, got ", channels);
  const ArchInfo& info = arch_info(arch);
  Rng rng(0);
  LayerPtr model = make_model(arch, classes, channels, rng);
  const Shape input =
      info.image_size > 0 ? Shape{1, channels, info.image_size, info.image_size} : Shape{};
  return layer_table(*model,
                     info.name + ": " + std::to_string(classes) + " classes, " +
                         std::to_string(channels) + " input channels, " +
                         image_text(info.image_size) + " input",
                     input);
}

}  // namespace st
