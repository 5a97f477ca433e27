#include "optim/clip.h"

#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "optim/optimizer.h"

namespace st {

double grad_norm(const std::vector<Param*>& params) {
  // One reduction per gradient, one wait for all of them on a device.
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (const Param* p : params) grads.push_back(p->grad);
  if (params.empty() || !params.front()->grad.device().is_emu())
    return std::sqrt(sum_squares(grads));
  // The emulated device runs the CPU's per-tensor sums, added in the CPU's order.
  double sum = 0;
  run_where_params_live(params, "grad_norm", [&] {
    for (const Tensor& g : grads) sum += sum_squares(g);
  });
  return std::sqrt(sum);
}

double clip_grad_norm(const std::vector<Param*>& params, double max_norm) {
  ST_CHECK(max_norm > 0.0, "clip_grad_norm: max norm must be > 0, got ", max_norm);
  const double norm = grad_norm(params);
  // PyTorch multiplies by clamp(max_norm / (norm + 1e-6), max=1); we skip the no-op
  // multiply, and a non-finite norm is left for the caller to report (NaN loss check).
  const double coef = max_norm / (norm + 1e-6);
  if (std::isfinite(norm) && coef < 1.0) {
    run_where_params_live(params, "clip_grad_norm", [&] {
      for (Param* p : params) scale_inplace(p->grad, static_cast<float>(coef));
    });
  }
  return norm;
}

}  // namespace st
