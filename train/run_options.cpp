#include "train/run_options.h"

#include <utility>

namespace st {

OptimizerOptions optimizer_options(const TrainConfig& c) {
  OptimizerOptions o;
  o.lr = c.lr;
  o.weight_decay = c.weight_decay;
  o.no_decay_on_norm_and_bias = c.no_wd_on_bn;
  if (c.optimizer == "sgd") {
    o.momentum = c.momentum;
    o.nesterov = c.nesterov;
  } else {
    o.betas = std::make_pair(c.beta1, c.beta2);
    o.eps = c.eps;
  }
  return o;
}

ReducerOptions reducer_options(const TrainConfig& c, bool clips_before_exchange) {
  ReducerOptions ro;
  ro.bucket_cap_mb = c.bucket_cap_mb;
  ro.first_bucket_mb = c.first_bucket_mb;
  ro.defer_until_finalize = !c.overlap || (clips_before_exchange && c.clip > 0);
  return ro;
}

}  // namespace st
