// Dynamic loss scaling for fp16 training (Micikevicius et al., "Mixed Precision
// Training", ICLR 2018, section 3.2), with PyTorch's GradScaler rule and defaults: the
// loss gradient is multiplied by the scale S before backward, so small gradients do not
// flush to zero in fp16; after the exchange the gradient is divided by S. A step whose
// gradient holds an inf or NaN (an fp16 overflow) is skipped and S is halved; after
// `interval` clean steps in a row S doubles.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/tensor.h"

namespace st {

class Communicator;

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth = 2.0;
  double backoff = 0.5;
  int64_t interval = 2000;  // clean steps before the scale grows
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions o = {});
  // The factor backward's loss gradient is multiplied by.
  float scale() const { return static_cast<float>(scale_); }
  // Divides `grads` (the exchanged gradient, a float tensor on either device) by the
  // scale and checks it is finite on every rank (one allreduce over `comm`; all ranks then agree).
  // Returns true when the optimiser may step; false means an overflow: the step is
  // skipped and the scale lowered.
  bool unscale_and_check(Tensor& grads, Communicator& comm);
  // The scale rule alone: after a step whose gradient was finite (or not).
  void update(bool finite);
  int64_t clean_steps() const { return clean_steps_; }
  int64_t skipped_steps() const { return skipped_; }
  bool last_skipped() const { return last_skipped_; }

  // Checkpoint metadata ("loss_scale", "loss_scale_clean_steps", "loss_scale_skipped")
  // and its restore; `path` names the file in errors. A checkpoint without the keys
  // (an fp32 or bf16 run's) leaves the scaler at its initial state.
  void save(std::map<std::string, std::string>& meta) const;
  void restore(const std::map<std::string, std::string>& meta, const std::string& path);

 private:
  LossScalerOptions o_;
  double scale_;
  int64_t clean_steps_ = 0, skipped_ = 0;
  bool last_skipped_ = false;
};

}  // namespace st
