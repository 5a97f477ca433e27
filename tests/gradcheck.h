// One finite-difference gradient checker for every layer (the ggml / Caffe idea).
// Loss L = sum_i y_i * w_i with a fixed random w; the analytic dL/dx and dL/dparam from
// backward(w) are compared with central differences. Points where the one-sided
// slopes disagree sit on a kink (ReLU at 0, a max-pool tie) and are skipped.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/rng.h"
#include "layers/layer.h"

namespace st::test {

struct GradCheckOptions {
  float eps = 1e-2f;
  double atol = 2e-3;
  double rtol = 2e-2;
  int max_points = 60;          // sampled elements per tensor
  double max_kink_share = 0.2;  // fail if more than this share of points are skipped
  bool check_input = true;
};

Tensor random_tensor(const Shape& shape, Rng& rng, float scale = 1.0f);

// Checks input and parameter gradients of `layer` at input x. Also checks that every
// parameter announced "gradient ready" exactly once during backward.
void check_layer_gradients(Layer& layer, const Tensor& x, const GradCheckOptions& opt = {});

// Checks the gradient of a scalar function f(x) against an analytic gradient g.
void check_scalar_gradient(const std::function<double(const Tensor&)>& f, const Tensor& x,
                           const Tensor& analytic, const std::string& what,
                           const GradCheckOptions& opt = {});

}  // namespace st::test
