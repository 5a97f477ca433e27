#include "optim/sgd.h"

#include "core/error.h"

namespace st {

namespace {

// The element loop for one parameter; the flags are template arguments so each
// variant compiles to a branch-free, vectorisable loop.
template <bool kMomentum, bool kNesterov, bool kFirst>
void sgd_loop(float* p, float* buf, const float* g, int64_t n, const math::SgdCoeffs& c) {
  if (kMomentum) {
#pragma omp parallel for simd if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; ++i)
      math::sgd_update<kMomentum, kNesterov, kFirst>(p[i], buf[i], g[i], c);
  } else {
#pragma omp parallel for simd if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float unused = 0.0f;
      math::sgd_update<false, false, false>(p[i], unused, g[i], c);
    }
  }
}

}  // namespace

Sgd::Sgd(std::vector<Param*> params, const SgdOptions& options)
    : params_(std::move(params)), options_(options), buffers_(params_.size()) {
  ST_CHECK(options.lr >= 0.0f, "SGD: learning rate must be >= 0, got ", options.lr);
  ST_CHECK(options.momentum >= 0.0f, "SGD: momentum must be >= 0, got ", options.momentum);
  ST_CHECK(options.weight_decay >= 0.0f, "SGD: weight decay must be >= 0, got ",
           options.weight_decay);
  ST_CHECK(!options.nesterov || (options.momentum > 0.0f && options.dampening == 0.0f),
           "SGD: Nesterov momentum requires a momentum > 0 and zero dampening");
  for (Param* p : params_) {
    ST_CHECK(p != nullptr, "SGD: null parameter");
    ST_CHECK(p->value.shape() == p->grad.shape(), "SGD: parameter ", p->name, " has value ",
             p->value.shape(), " but gradient ", p->grad.shape());
  }
}

float Sgd::weight_decay_of(size_t i) const {
  return weight_decay_for(*params_.at(i), options_.weight_decay,
                          options_.no_decay_on_norm_and_bias);
}

void Sgd::step_params(const std::vector<size_t>& which, float lr) {
  std::vector<Param*> written;
  std::vector<Step> steps;
  for (const size_t i : which) {
    written.push_back(params_[i]);
    steps.push_back(plan_step(i, lr));
  }
  queue_where_params_live(written, "SGD", [steps = std::move(steps), o = options_]() mutable {
    for (Step& s : steps) apply(s, o);
  });
}

// On the host, before anything is queued: the coefficients at this step's rate, and the
// momentum buffer a first step creates (so state_dict sees it at once, as PyTorch's).
Sgd::Step Sgd::plan_step(size_t i, float lr) {
  Param& p = *params_[i];
  const Device device = p.value.device();
  ST_CHECK(p.grad.device() == device, "SGD: parameter ", p.name, " is on ", device.str(),
           " but its gradient on ", p.grad.device().str());
#ifndef SPARSETRAIN_WITH_CUDA
  ST_CHECK(!device.is_cuda(), "SGD: parameter ", p.name, " is on ", device.str(),
           " but this build has no CUDA");
#endif
  Step s{
      p.value, p.grad, {}, {lr, options_.momentum, options_.dampening, weight_decay_of(i)}, false};
  if (options_.momentum != 0.0f) {
    s.first = !buffers_[i].defined();
    if (s.first) buffers_[i] = Tensor::empty(p.value.shape(), DType::F32, device);
    s.buffer = buffers_[i];
  }
  return s;
}

void Sgd::apply(Step& s, const SgdOptions& o) {
  const int64_t n = s.value.numel();
  float* v = s.value.f32();
  const float* g = s.grad.f32();
  const bool momentum = o.momentum != 0.0f;
  float* b = momentum ? s.buffer.f32() : nullptr;
  const math::SgdCoeffs& c = s.coeffs;
#ifdef SPARSETRAIN_WITH_CUDA
  if (s.value.device().is_cuda())
    return cuda::sgd_update(v, b, g, n, c, momentum, o.nesterov, s.first, s.value.device().index);
#endif
  if (!momentum) {
    sgd_loop<false, false, false>(v, nullptr, g, n, c);
    return;
  }
  if (o.nesterov && s.first) {
    sgd_loop<true, true, true>(v, b, g, n, c);
  } else if (o.nesterov) {
    sgd_loop<true, true, false>(v, b, g, n, c);
  } else if (s.first) {
    sgd_loop<true, false, true>(v, b, g, n, c);
  } else {
    sgd_loop<true, false, false>(v, b, g, n, c);
  }
}

std::map<std::string, Tensor> Sgd::state_dict() const {
  std::map<std::string, Tensor> state;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!buffers_[i].defined()) continue;
    const std::string key = params_[i]->name + ".momentum_buffer";
    ST_CHECK(state.count(key) == 0, "SGD state: two parameters share the name '", params_[i]->name,
             "' (call collect_params to name them)");
    state.emplace(key, buffers_[i]);
  }
  return state;
}

void Sgd::load_state_dict(const std::map<std::string, Tensor>& state) {
  const std::map<std::string, StateKey> keys = state_keys(params_, {"momentum_buffer"}, "SGD");
  check_state_known(state, keys, "SGD");
  for (const auto& [key, t] : state) {
    const Param& p = *params_[keys.at(key).param];
    ST_CHECK(t.shape() == p.value.shape() && t.dtype() == DType::F32, "SGD state: '", key, "' is ",
             t.str(), " but parameter ", p.name, " is ", p.value.str());
  }
  // A step gives every parameter its buffer: a state naming some but not all is damaged
  // (a missing buffer would restart at zero).
  for (const Param* p : params_)
    ST_CHECK(state.empty() || state.count(p->name + ".momentum_buffer"), "SGD state: '", p->name,
             ".momentum_buffer' is missing while other parameters have theirs");
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = state.find(params_[i]->name + ".momentum_buffer");
    if (it == state.end()) {
      buffers_[i] = Tensor();
      continue;
    }
    buffers_[i] = Tensor::empty(params_[i]->value.shape(), DType::F32, params_[i]->value.device());
    buffers_[i].copy_from(it->second);
  }
}

}  // namespace st
