// `sparsetrain sparsifiers` and `sparsetrain sparsifiers --json`, printed from the registry
// rows (the JSON feeds scripts/sparsifier_table.py and scripts/scaling_model.py).
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/word_list.h"
#include "sparsify/registry.h"

namespace st {

namespace {

std::string cite(const Paper& p) {
  if (p.authors.empty()) return "";
  return p.authors + " (" + p.venue + ", " + std::to_string(p.year) + "); ";
}

nlohmann::ordered_json bound(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

// "default" is a number; when it stands for a word (sidco's adapt=auto) it may lie outside
// [min, max], and "default_text" gives the word.
nlohmann::ordered_json key_json(const SpKey& k) {
  nlohmann::ordered_json words = nlohmann::ordered_json::object();
  for (const auto& [word, value] : k.words) words[word] = value;
  return {{"name", k.name},
          {"default", k.default_value},
          {"default_text", k.default_text()},
          {"min", bound(k.range.min)},
          {"max", bound(k.range.max)},
          {"min_open", k.range.min_open},
          {"max_open", k.range.max_open},
          {"integer", k.integer},
          {"words", words},
          {"allowed", k.allowed()},
          {"meaning", k.meaning}};
}

// Where the method trains: every method selects through bulk::Ops, so on CPU, CUDA and
// emulated-device buckets; per-sample squared gradients come from the CPU layers' code,
// which the CPU and the emulated device run and the CUDA layers do not.
std::vector<std::string> devices(const SparsifierInfo& s) {
  if (s.side_inputs.sq_grads) return {"cpu", "emu"};
  return {"cpu", "cuda", "emu"};
}

// The side inputs the training loop supplies (SideInputs): name and meaning.
std::vector<std::pair<std::string, std::string>> side_inputs(const SparsifierInfo& s) {
  std::vector<std::pair<std::string, std::string>> inputs;
  if (s.side_inputs.sq_grads) inputs.emplace_back("sq_grads", "per-sample squared-gradient sums");
  return inputs;
}

}  // namespace

std::string sparsifiers_listing(const std::vector<SparsifierInfo>& table) {
  std::string out;
  const std::string indent(13, ' ');
  for (const SparsifierInfo& s : table) {
    std::string name = s.name;
    name.resize(std::max<size_t>(name.size() + 1, indent.size()), ' ');
    out += name + s.summary + "\n";
    out += indent + cite(s.paper) + "exchange: " + pattern_name(s.pattern()) +
           (s.partitioned() ? ", each rank in its own partition" : "") +
           "; devices: " + word_list(devices(s)) + "\n";
    if (!s.per_rank_state.empty()) out += indent + "per-rank state: " + s.per_rank_state + "\n";
    for (const auto& [input, meaning] : side_inputs(s))
      out += indent + "side input: " + meaning + " (" + input + ")\n";
    for (const SpKey& k : s.keys) {
      std::string pair = k.name + "=" + k.default_text();
      pair.resize(std::max<size_t>(pair.size() + 1, 16), ' ');
      out += indent + "--sp " + pair + k.meaning + "; " + k.allowed() + "\n";
    }
  }
  return out;
}

std::string sparsifiers_json(const std::vector<SparsifierInfo>& table) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const SparsifierInfo& s : table) {
    nlohmann::ordered_json keys = nlohmann::ordered_json::array();
    for (const SpKey& k : s.keys) keys.push_back(key_json(k));
    std::vector<std::string> input_names;
    for (const auto& input : side_inputs(s)) input_names.push_back(input.first);
    nlohmann::ordered_json paper = nullptr;
    if (!s.paper.authors.empty())
      paper = {{"authors", s.paper.authors}, {"venue", s.paper.venue}, {"year", s.paper.year}};
    list.push_back(
        {{"name", s.name},
         {"summary", s.summary},
         {"paper", paper},
         {"pattern", pattern_name(s.pattern())},
         {"partitioned", s.partitioned()},
         {"device", devices(s)},
         {"per_rank_state", s.per_rank_state.empty() ? nlohmann::ordered_json(nullptr)
                                                     : nlohmann::ordered_json(s.per_rank_state)},
         {"side_inputs", input_names},
         {"keys", keys}});
  }
  return nlohmann::ordered_json{{"sparsifiers", list}}.dump(1) + "\n";
}

std::string sparsifier_flag_help(const std::vector<SparsifierInfo>& table) {
  std::vector<std::string> names = {"none (plain dense allreduce)"};
  for (const SparsifierInfo& s : table) names.push_back(s.name);
  return "gradient sparsifier: " + word_list(names) + " (`sparsetrain sparsifiers` describes them)";
}

}  // namespace st
