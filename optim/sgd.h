// Stochastic gradient descent exactly as torch.optim.SGD in PyTorch 1.13: weight decay
// added to the gradient, a momentum buffer that starts as the first gradient
// (dampening 0 by default), optional Nesterov momentum. Optionally no weight decay on
// BatchNorm and bias parameters, as Goyal et al. 2017 do for BN's gamma and beta.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "layers/param.h"
#include "optim/optimizer.h"
#include "optim/sgd_update.h"

namespace st {

struct SgdOptions {
  float lr = 0.1f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  // Skip weight decay on ParamKind::Norm and ParamKind::Bias (PyTorch applies it to all).
  bool no_decay_on_norm_and_bias = false;
};

class Sgd : public Optimizer {
 public:
  // Parameters keep their order; names (from collect_params) key the saved state.
  Sgd(std::vector<Param*> params, const SgdOptions& options);

  std::string name() const override { return "sgd"; }
  // p -= lr * direction(grad) for the parameters `which`.
  void step_params(const std::vector<size_t>& which, float lr) override;

  float lr() const override { return options_.lr; }
  void set_lr(float lr) override { options_.lr = lr; }
  const SgdOptions& options() const { return options_; }
  const std::vector<Param*>& params() const override { return params_; }
  // Weight decay this optimiser applies to `params()[i]` (0 when skipped for its kind).
  float weight_decay_of(size_t i) const override;

  // Optimiser state for checkpoints: "<param name>.momentum_buffer" -> buffer, only for
  // buffers that exist (PyTorch creates a buffer at its parameter's first step). The
  // tensors share storage with the live buffers.
  std::map<std::string, Tensor> state_dict() const override;
  // Restores buffers saved by state_dict(); unknown names or wrong shapes throw, and a
  // parameter without a saved buffer starts fresh, as in PyTorch.
  void load_state_dict(const std::map<std::string, Tensor>& state) override;

 private:
  // One parameter's update as decided on the host, held by value for a queued task.
  struct Step {
    Tensor value, grad, buffer;  // buffer: undefined without momentum
    math::SgdCoeffs coeffs;
    bool first;  // the buffer's first step: it starts as the gradient
  };
  // Decided on the host, before anything is queued (a parameter this build cannot
  // update is refused there).
  Step plan_step(size_t i, float lr);
  static void apply(Step& s, const SgdOptions& o);

  std::vector<Param*> params_;
  SgdOptions options_;
  std::vector<Tensor> buffers_;  // undefined until the parameter's first momentum step
};

#ifdef SPARSETRAIN_WITH_CUDA
namespace cuda {
// The same update (math::sgd_update) over n device floats on `device`'s current stream.
void sgd_update(float* p, float* buf, const float* grad, int64_t n, const math::SgdCoeffs& c,
                bool momentum, bool nesterov, bool first, int device);
}  // namespace cuda
#endif

}  // namespace st
