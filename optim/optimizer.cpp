#include "optim/optimizer.h"

#include "core/emu/launch.h"
#include "core/emu/ordering.h"
#include "core/emu/stream.h"
#include "core/error.h"

namespace st {

void Optimizer::zero_grad() {
  for (Param* p : params()) p->grad.zero();
}

std::vector<size_t> Optimizer::all_params() const {
  std::vector<size_t> all(params().size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

namespace {

Device device_of(const std::vector<Param*>& params) {
  return params.empty() ? Device::cpu() : params.front()->value.device();
}

}  // namespace

void queue_where_params_live(const std::vector<Param*>& written, const char* who,
                             std::function<void()> update) {
  const Device device = device_of(written);
  if (!device.is_emu()) return update();
  std::vector<Tensor> values;
  std::vector<std::string> names;
  for (const Param* p : written) {
    values.push_back(p->value);
    names.push_back(std::string(who) + "'s update of " + p->name);
  }
  emu::launch(
      device.index,
      [values = std::move(values), names = std::move(names), update = std::move(update)] {
        for (size_t i = 0; i < values.size(); ++i) {
          const Tensor v = values[i].as_host_memory();
          emu::check_write_ordered(v.raw(), v.nbytes(), names[i]);
        }
        update();
      },
      who);
}

void run_where_params_live(const std::vector<Param*>& params, const char* who,
                           const std::function<void()>& update) {
  const Device device = device_of(params);
  if (!device.is_emu()) {
    update();
    return;
  }
  emu::run_in_stream_order(device.index, who, update, /*slow=*/true);
}

float weight_decay_for(const Param& p, float weight_decay, bool no_decay_on_norm_and_bias) {
  const bool skip =
      no_decay_on_norm_and_bias && (p.kind == ParamKind::Norm || p.kind == ParamKind::Bias);
  return skip ? 0.0f : weight_decay;
}

std::map<std::string, StateKey> state_keys(const std::vector<Param*>& params,
                                           const std::vector<std::string>& state_names,
                                           const std::string& who) {
  std::map<std::string, StateKey> keys;
  for (size_t i = 0; i < params.size(); ++i) {
    for (const std::string& s : state_names) {
      const bool fresh = keys.emplace(params[i]->name + "." + s, StateKey{i, s}).second;
      ST_CHECK(fresh, who, " state: two parameters share the name '", params[i]->name,
               "' (call collect_params to name them)");
    }
  }
  return keys;
}

void check_state_known(const std::map<std::string, Tensor>& state,
                       const std::map<std::string, StateKey>& keys, const std::string& who) {
  for (const auto& entry : state) {
    if (keys.count(entry.first)) continue;
    std::string names;
    for (const auto& [key, where] : keys)
      if (where.param == 0) names += (names.empty() ? "" : ", ") + where.state;
    ST_THROW(who, " state: '", entry.first, "' matches no parameter state of this model (",
             "keys are <param name>.<state> with state one of: ", names, ")");
  }
}

}  // namespace st
