#include "optim/adam.h"

#include <cmath>

#include "core/error.h"

namespace st {

namespace {

// The element loop for one parameter; amsgrad is a template argument so each variant
// compiles to a branch-free, vectorisable loop.
template <bool kAmsgrad>
void adam_loop(float* p, float* m, float* v, float* vmax, const float* g, int64_t n,
               const math::AdamCoeffs& c) {
#pragma omp parallel for simd if (n > 65536) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float unused = 0.0f;
    math::adam_update<kAmsgrad>(p[i], m[i], v[i], kAmsgrad ? vmax[i] : unused, g[i], c);
  }
}

// The scalars of `_single_tensor_adam(w)` at step t, in double as Python computes them.
math::AdamCoeffs adam_coeffs(const AdamOptions& o, double lr, float weight_decay, double t) {
  const double bias_correction1 = 1.0 - std::pow(o.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(o.beta2, t);
  math::AdamCoeffs c;
  c.beta1 = static_cast<float>(o.beta1);
  c.beta2 = static_cast<float>(o.beta2);
  c.one_minus_beta1 = static_cast<float>(1.0 - o.beta1);
  c.one_minus_beta2 = static_cast<float>(1.0 - o.beta2);
  c.weight_decay = o.decoupled ? 0.0f : weight_decay;
  c.decay_factor = o.decoupled ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
  c.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  c.eps = static_cast<float>(o.eps);
  return c;
}

}  // namespace

Adam::Adam(std::vector<Param*> params, const AdamOptions& options)
    : params_(std::move(params)), options_(options), state_(params_.size()) {
  const std::string who = name();
  ST_CHECK(options.lr >= 0.0f, who, ": learning rate must be >= 0, got ", options.lr);
  ST_CHECK(options.eps >= 0.0, who, ": eps must be >= 0, got ", options.eps);
  ST_CHECK(options.beta1 >= 0.0 && options.beta1 < 1.0, who, ": beta1 must be in [0, 1), got ",
           options.beta1);
  ST_CHECK(options.beta2 >= 0.0 && options.beta2 < 1.0, who, ": beta2 must be in [0, 1), got ",
           options.beta2);
  ST_CHECK(options.weight_decay >= 0.0f, who, ": weight decay must be >= 0, got ",
           options.weight_decay);
  for (Param* p : params_) {
    ST_CHECK(p != nullptr, who, ": null parameter");
    ST_CHECK(p->value.shape() == p->grad.shape(), who, ": parameter ", p->name, " has value ",
             p->value.shape(), " but gradient ", p->grad.shape());
  }
}

float Adam::weight_decay_of(size_t i) const {
  return weight_decay_for(*params_.at(i), options_.weight_decay,
                          options_.no_decay_on_norm_and_bias);
}

void Adam::step_params(const std::vector<size_t>& which, float lr) {
  std::vector<Param*> written;
  std::vector<Step> steps;
  for (const size_t i : which) {
    written.push_back(params_[i]);
    steps.push_back(plan_step(i, lr));
  }
  queue_where_params_live(written, "Adam", [steps = std::move(steps)]() mutable {
    for (Step& s : steps) apply(s);
  });
}

void Adam::init_state(size_t i) {
  const Param& p = *params_[i];
  State& s = state_[i];
  s.exp_avg = Tensor::zeros(p.value.shape(), DType::F32, p.value.device());
  s.exp_avg_sq = Tensor::zeros(p.value.shape(), DType::F32, p.value.device());
  if (options_.amsgrad)
    s.max_exp_avg_sq = Tensor::zeros(p.value.shape(), DType::F32, p.value.device());
  s.step = Tensor::zeros(Shape{});
}

// On the host, before anything is queued: the state a first step creates, the step count
// (a host scalar, as PyTorch 1.13 keeps it) and the coefficients it gives.
Adam::Step Adam::plan_step(size_t i, float lr) {
  Param& p = *params_[i];
  const Device device = p.value.device();
  ST_CHECK(p.grad.device() == device, name(), ": parameter ", p.name, " is on ", device.str(),
           " but its gradient on ", p.grad.device().str());
#ifndef SPARSETRAIN_WITH_CUDA
  ST_CHECK(!device.is_cuda(), name(), ": parameter ", p.name, " is on ", device.str(),
           " but this build has no CUDA");
#endif
  State& st = state_[i];
  if (!st.step.defined()) init_state(i);
  const float t = *st.step.f32() += 1.0f;
  return Step{p.value,           p.grad,
              st.exp_avg,        st.exp_avg_sq,
              st.max_exp_avg_sq, adam_coeffs(options_, lr, weight_decay_of(i), t)};
}

void Adam::apply(Step& s) {
  const int64_t n = s.value.numel();
  const bool amsgrad = s.max_exp_avg_sq.defined();
  float* vmax = amsgrad ? s.max_exp_avg_sq.f32() : nullptr;
#ifdef SPARSETRAIN_WITH_CUDA
  if (s.value.device().is_cuda())
    return cuda::adam_update(s.value.f32(), s.exp_avg.f32(), s.exp_avg_sq.f32(), vmax, s.grad.f32(),
                             n, s.coeffs, amsgrad, s.value.device().index);
#endif
  if (amsgrad) {
    adam_loop<true>(s.value.f32(), s.exp_avg.f32(), s.exp_avg_sq.f32(), vmax, s.grad.f32(), n,
                    s.coeffs);
  } else {
    adam_loop<false>(s.value.f32(), s.exp_avg.f32(), s.exp_avg_sq.f32(), vmax, s.grad.f32(), n,
                     s.coeffs);
  }
}

std::vector<std::string> Adam::state_names() const {
  std::vector<std::string> names = {"exp_avg", "exp_avg_sq", "step"};
  if (options_.amsgrad) names.push_back("max_exp_avg_sq");
  return names;
}

Adam::StateMember Adam::state_member(const std::string& name) {
  if (name == "exp_avg") return &State::exp_avg;
  if (name == "exp_avg_sq") return &State::exp_avg_sq;
  if (name == "max_exp_avg_sq") return &State::max_exp_avg_sq;
  if (name == "step") return &State::step;
  ST_THROW("Adam: no state named '", name, "'");
}

std::map<std::string, Tensor> Adam::state_dict() const {
  std::map<std::string, Tensor> state;
  bool any = false;
  for (const State& s : state_) any = any || s.step.defined();
  if (!any) return state;  // before the first step; unnamed parameters are fine until then
  const std::map<std::string, StateKey> keys = state_keys(params_, state_names(), name());
  for (const auto& [key, where] : keys) {
    const Tensor& t = state_[where.param].*state_member(where.state);
    if (t.defined()) state.emplace(key, t);
  }
  return state;
}

void Adam::load_state_dict(const std::map<std::string, Tensor>& state) {
  const std::vector<std::string> names = state_names();
  const std::map<std::string, StateKey> keys = state_keys(params_, names, name());
  check_state_known(state, keys, name());
  std::vector<int> found(params_.size(), 0);
  for (const auto& [key, t] : state) {
    const StateKey& where = keys.at(key);
    const Param& p = *params_[where.param];
    ++found[where.param];
    if (where.state == "step") {
      ST_CHECK(t.numel() == 1 && t.rank() <= 1 && t.dtype() != DType::I32, name(), " state: '", key,
               "' is ", t.str(), " but a step count is a float32 or int64 scalar");
      continue;
    }
    ST_CHECK(t.shape() == p.value.shape() && t.dtype() == DType::F32, name(), " state: '", key,
             "' is ", t.str(), " but parameter ", p.name, " is ", p.value.str());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    ST_CHECK(found[i] == 0 || found[i] == static_cast<int>(names.size()), name(),
             " state: parameter ", params_[i]->name, " has ", found[i], " of its ", names.size(),
             " state tensors (", names.size() == 4 ? "amsgrad needs max_exp_avg_sq; " : "",
             "a parameter's state is all or nothing)");
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    state_[i] = State{};
    if (found[i] == 0) continue;
    init_state(i);
    for (const std::string& s : names) {
      const Tensor& src = state.at(params_[i]->name + "." + s);
      if (s != "step") {
        (state_[i].*state_member(s)).copy_from(src);
        continue;
      }
      const Tensor step = src.to(Device::cpu());
      *state_[i].step.f32() =
          step.dtype() == DType::I64 ? static_cast<float>(*step.data<int64_t>()) : *step.f32();
    }
  }
}

}  // namespace st
