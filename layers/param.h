// Param: a trainable tensor, its gradient, and the "gradient ready" signal.
// After flatten_params() both value and grad are views into flat buffers, so the
// reducer reads gradients in place where backward wrote them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace st {

// Kind matters to the optimiser (weight decay is optionally skipped on norm and bias).
enum class ParamKind { Weight, Bias, Norm };

struct Param {
  Tensor value;
  Tensor grad;
  ParamKind kind = ParamKind::Weight;
  std::string name;  // full dotted name, e.g. "layer1.0.conv1.weight" (set by name_params)
  int index = -1;    // position in forward (registration) order
  // Called by the owning layer when `grad` is final for this backward pass.
  std::function<void(Param&)> on_grad_ready;
  // Called by the owning layer before a forward reads `value`. With the next forward
  // overlapping the exchange (P3, MLSys'19), the reducer waits here for this parameter's
  // bucket to be exchanged and its update applied.
  std::function<void(Param&)> before_forward;
  // Opt-in per-sample squared-gradient sums (variance-based compression, Tsuzuku et al.
  // 2018): when `sq_grad` is defined (same shape as grad), layers that can (those that set
  // `provides_sq_grad`: Linear, Conv2d, Embedding) accumulate sum over samples i of (sample i's
  // term of grad)^2 into it during backward, before mark_grad_ready(). Undefined costs nothing.
  Tensor sq_grad;
  bool provides_sq_grad = false;

  void mark_grad_ready();
};

// Where announcements go inside a layer's queued backward on the emulated device: the host
// has announced the layer's gradients already, in stream order after the task
// (layers/layer.cpp), so the task's own calls are collected here and checked against them.
// Null everywhere else. One per thread (an inline function's thread_local is one object
// across the program).
inline std::vector<Param*>*& grad_ready_sink() {
  thread_local std::vector<Param*>* sink = nullptr;
  return sink;
}

inline void Param::mark_grad_ready() {
  if (std::vector<Param*>* sink = grad_ready_sink()) return sink->push_back(this);
  if (on_grad_ready) on_grad_ready(*this);
}

// A persistent non-trainable tensor (BatchNorm running statistics).
struct Buffer {
  Tensor value;
  std::string name;
};

}  // namespace st
