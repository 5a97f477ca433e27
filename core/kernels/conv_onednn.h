// Convolution on the CPU through oneDNN (Debian libdnnl-dev), the faster route for the
// small-channel convolutions of CIFAR ResNets. Weights stay OIHW in sparsetrain tensors;
// activations are NCHW or blocked in 16 channels (core/layout.h), and oneDNN reorders
// whatever differs from the layout it computes in. The
// im2col + GEMM path in layers/conv2d.cpp stays the readable reference and the
// fallback when oneDNN is absent; tests compare the two.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/kernels/im2col.h"

namespace st::cpu {

// True when sparsetrain was built with oneDNN.
bool onednn_built();

// Which activations of a convolution are blocked in 16 channels (core/layout.h): x and dx
// share one layout, y and dy another.
struct ConvLayouts {
  bool x = false, y = false;
};

// Which activations are bfloat16 rather than float32 (x with dx, y with dy): under
// --precision bf16 a ResNet hands bfloat16 activations from layer to layer.
struct ConvDTypes {
  bool x_bf16 = false, y_bf16 = false;
  bool operator==(const ConvDTypes&) const = default;
  // The type y is written in and dy read in.
  DType y_dtype() const { return y_bf16 ? DType::BF16 : DType::F32; }
};

// Primitives for one (batch, geometry) combination; build once, run every step.
// With `bf16`, the primitives read the operands (x, w, dy) as bfloat16 and write dw and
// db in fp32, accumulating in fp32 (oneDNN's avx512_core_bf16 kernels; the reorders that
// already convert NCHW to oneDNN's blocked layouts also round to bf16); y and dx are
// bfloat16 where `io` says so (only with `bf16`), fp32 otherwise. Weights and their
// gradients are fp32 buffers: parameters stay fp32 master copies. Activations are passed
// as untyped pointers to elements of the types `io` gives.
class OneDnnConv {
 public:
  OneDnnConv(int64_t batch, int64_t out_channels, const ConvGeometry& g, bool bias,
             bool bf16 = false, ConvDTypes io = {});
  ~OneDnnConv();
  OneDnnConv(const OneDnnConv&) = delete;
  OneDnnConv& operator=(const OneDnnConv&) = delete;

  bool matches(int64_t batch, const ConvGeometry& g, ConvDTypes io = {}) const;
  // oneDNN's name for the forward implementation it picked (e.g. "brgconv:avx512_core_bf16").
  std::string forward_impl() const;
  // Whether the primitive computes y in the blocked layout, so that writing y blocked
  // costs no reorder.
  bool writes_blocked_in_place() const;
  // The activations' types the primitives were built for.
  ConvDTypes io() const;
  // y = conv(x, w) + b.
  void forward(const void* x, const float* w, const float* b, void* y,
               const ConvLayouts& layouts = {});
  // dw += dL/dw, db += dL/db (when bias), dx = dL/dx. Needs the preceding forward.
  void backward(const void* x, const float* w, const void* dy, float* dw, float* db, void* dx,
                const ConvLayouts& layouts = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace st::cpu
