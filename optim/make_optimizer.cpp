#include "optim/make_optimizer.h"

#include "core/error.h"
#include "core/word_list.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace st {

namespace {

template <typename T>
void reject(const std::optional<T>& option, const char* option_name, const std::string& name,
            const char* applies_to) {
  ST_CHECK(!option.has_value(), "optimizer ", name, ": ", option_name, " applies to ", applies_to,
           " only");
}

std::unique_ptr<Optimizer> make_sgd(std::vector<Param*> params, const OptimizerOptions& o) {
  reject(o.betas, "betas", "sgd", "adam and adamw");
  reject(o.eps, "eps", "sgd", "adam and adamw");
  reject(o.amsgrad, "amsgrad", "sgd", "adam and adamw");
  ST_CHECK(o.lr.has_value(), "optimizer sgd: a learning rate is required (torch.optim.SGD has ",
           "no default)");
  SgdOptions so;
  so.lr = *o.lr;
  so.momentum = o.momentum.value_or(so.momentum);
  so.dampening = o.dampening.value_or(so.dampening);
  so.nesterov = o.nesterov.value_or(so.nesterov);
  so.weight_decay = o.weight_decay.value_or(so.weight_decay);
  so.no_decay_on_norm_and_bias = o.no_decay_on_norm_and_bias;
  return std::make_unique<Sgd>(std::move(params), so);
}

std::unique_ptr<Optimizer> make_adam(const std::string& name, std::vector<Param*> params,
                                     const OptimizerOptions& o) {
  reject(o.momentum, "momentum", name, "sgd");
  reject(o.dampening, "dampening", name, "sgd");
  reject(o.nesterov, "nesterov", name, "sgd");
  AdamOptions ao;
  ao.decoupled = name == "adamw";
  ao.lr = o.lr.value_or(ao.lr);
  ao.beta1 = o.betas ? o.betas->first : ao.beta1;
  ao.beta2 = o.betas ? o.betas->second : ao.beta2;
  ao.eps = o.eps.value_or(ao.eps);
  ao.weight_decay = o.weight_decay.value_or(ao.decoupled ? kAdamWWeightDecay : ao.weight_decay);
  ao.amsgrad = o.amsgrad.value_or(ao.amsgrad);
  ao.no_decay_on_norm_and_bias = o.no_decay_on_norm_and_bias;
  return std::make_unique<Adam>(std::move(params), ao);
}

}  // namespace

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = {"sgd", "adam", "adamw"};
  return names;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Param*> params,
                                          const OptimizerOptions& options) {
  if (name == "sgd") return make_sgd(std::move(params), options);
  if (name == "adam" || name == "adamw") return make_adam(name, std::move(params), options);
  ST_THROW("unknown optimizer '", name, "' (valid: ", word_list(optimizer_names()), ")");
}

}  // namespace st
