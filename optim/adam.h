// Adam and AdamW exactly as torch.optim.Adam and torch.optim.AdamW in PyTorch 1.13
// (the default single-tensor path): first and second moment running averages, bias
// correction by the step count t, p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// Adam adds weight decay to the gradient (L2); AdamW (`decoupled`) first multiplies the
// parameter by 1 - lr * wd. Optionally no weight decay on BatchNorm and bias parameters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "layers/param.h"
#include "optim/adam_update.h"
#include "optim/optimizer.h"

namespace st {

// Defaults are torch.optim.Adam's; AdamW's weight decay default is kAdamWWeightDecay.
// The betas and eps are doubles because PyTorch computes the bias corrections from
// Python floats: 1 - 0.999f differs from 1 - 0.999 in the fifth digit.
struct AdamOptions {
  float lr = 1e-3f;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  float weight_decay = 0.0f;
  bool decoupled = false;  // AdamW: decoupled weight decay
  bool amsgrad = false;
  // Skip weight decay on ParamKind::Norm and ParamKind::Bias (PyTorch applies it to all).
  bool no_decay_on_norm_and_bias = false;
};

// torch.optim.AdamW's default weight decay.
constexpr float kAdamWWeightDecay = 1e-2f;

class Adam : public Optimizer {
 public:
  // Parameters keep their order; names (from collect_params) key the saved state.
  Adam(std::vector<Param*> params, const AdamOptions& options);

  std::string name() const override { return options_.decoupled ? "adamw" : "adam"; }
  void step_params(const std::vector<size_t>& which, float lr) override;

  float lr() const override { return options_.lr; }
  void set_lr(float lr) override { options_.lr = lr; }
  const AdamOptions& options() const { return options_; }
  const std::vector<Param*>& params() const override { return params_; }
  float weight_decay_of(size_t i) const override;

  // Per parameter, once it has taken a step: "<name>.exp_avg", "<name>.exp_avg_sq" (float32,
  // the parameter's shape and device), "<name>.step" (a float32 scalar on the CPU, shape [],
  // as PyTorch 1.13 keeps it; exact up to 2^24 steps) and, with amsgrad,
  // "<name>.max_exp_avg_sq".
  std::map<std::string, Tensor> state_dict() const override;
  // A parameter's state is all of its keys or none (none: it starts fresh, as in PyTorch).
  // "step" may also be an int64 scalar; it is stored as float32.
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 private:
  struct State {
    Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;  // undefined until the first step
    Tensor step;                                 // float32 scalar on the CPU
  };
  std::vector<std::string> state_names() const;
  using StateMember = Tensor State::*;
  static StateMember state_member(const std::string& name);
  void init_state(size_t i);
  // One parameter's update as decided on the host, held by value for a queued task.
  struct Step {
    Tensor value, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;  // the last only with amsgrad
    math::AdamCoeffs coeffs;
  };
  // Decided on the host, before anything is queued (a parameter this build cannot
  // update is refused there).
  Step plan_step(size_t i, float lr);
  static void apply(Step& s);

  std::vector<Param*> params_;
  AdamOptions options_;
  std::vector<State> state_;
};

#ifdef SPARSETRAIN_WITH_CUDA
namespace cuda {
// The same update (math::adam_update) over n device floats on `device`'s current stream;
// vmax is used only with amsgrad.
void adam_update(float* p, float* m, float* v, float* vmax, const float* grad, int64_t n,
                 const math::AdamCoeffs& c, bool amsgrad, int device);
}  // namespace cuda
#endif

}  // namespace st
