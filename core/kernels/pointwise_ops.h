// The point-wise activations as functors over the shared per-element math (math.h), one
// struct per activation: what layers/pointwise.h turns into a layer on the CPU, the
// emulated device and CUDA. An activation is added here and in ST_POINTWISE_OPS below
// (plus its rows in the layer case table); nothing else names it.
//
// Each functor has
//   kName                its layer's describe() text;
//   kBackwardFromOutput  whether backward reads the output y (else the input x), the one
//                        tensor the layer keeps from forward;
//   kExactInBf16         whether a bfloat16 result loses nothing by rounding (the layer
//                        then takes bfloat16 activations, docs/PRECISION.md);
//   forward(x)           y;
//   backward(saved, dy)  dL/dx from the kept tensor and dL/dy.
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "core/kernels/math.h"

namespace st::math {

struct ReluOp {
  static constexpr const char* kName = "ReLU";
  static constexpr bool kBackwardFromOutput = true;  // y > 0 iff x > 0
  static constexpr bool kExactInBf16 = true;         // y is x or zero
  static ST_HD float forward(float x) { return relu(x); }
  static ST_HD float backward(float y, float dy) { return relu_backward(y, dy); }
};

// sigma(x) = 1 / (1 + e^-x); sigma' = y (1 - y), from the output.
struct SigmoidOp {
  static constexpr const char* kName = "Sigmoid";
  static constexpr bool kBackwardFromOutput = true;
  static constexpr bool kExactInBf16 = false;
  static ST_HD float forward(float x) { return sigmoid(x); }
  static ST_HD float backward(float y, float dy) { return dy * y * (1.0f - y); }
};

// GELU, the exact form of Hendrycks & Gimpel 2016 (PyTorch's default): x Phi(x) with Phi
// the standard normal CDF; d/dx = Phi(x) + x phi(x), from the input.
struct GeluOp {
  static constexpr const char* kName = "GELU";
  static constexpr bool kBackwardFromOutput = false;
  static constexpr bool kExactInBf16 = false;
  static ST_HD float cdf(float x) { return 0.5f * (1.0f + erff(x * 0.70710678118654752f)); }
  static ST_HD float forward(float x) { return x * cdf(x); }
  static ST_HD float backward(float x, float dy) {
    const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return dy * (cdf(x) + x * pdf);
  }
};

}  // namespace st::math

// X(layer name, functor): every point-wise layer, for the aliases and the explicit
// instantiations on each backend.
#define ST_POINTWISE_OPS(X) \
  X(ReLU, ReluOp)           \
  X(Sigmoid, SigmoidOp)     \
  X(GELU, GeluOp)
