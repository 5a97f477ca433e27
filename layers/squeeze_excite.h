// Squeeze-and-excitation (Hu et al. 2018, fig. 3): s = sigmoid(fc2(relu(fc1(avgpool(x))))),
// y = x * s per channel. fc1 and fc2 are 1x1 convolutions with bias (C -> C/r -> C), named
// "fc1" and "fc2" as in the CIFAR SENet of kuangliu's pytorch-cifar. A container: the
// squeeze is a chain of ordinary layers, the scale and its gradient are device-generic
// (core/channel_ops.h), so it runs on the CPU, the emulated device and CUDA alike.
#pragma once

#include <memory>

#include "core/rng.h"
#include "layers/sequential.h"

namespace st {

class SqueezeExcite : public RoutingContainer {
 public:
  SqueezeExcite(int64_t channels, int64_t reduced, Rng& rng);
  std::string describe() const override {
    return "SqueezeExcite(" + std::to_string(channels_) + "->" + std::to_string(reduced_) + ")";
  }

 protected:
  std::vector<std::pair<std::string, Layer*>> children() override { return {{"", squeeze_.get()}}; }
  Tensor route_forward(const Tensor& x) override;
  // dL/dx = dy * s + (the squeeze's backward of dL/ds = sum over h, w of dy * x).
  Tensor route_backward(const Tensor& dy) override;

 private:
  int64_t channels_, reduced_;
  std::unique_ptr<Sequential> squeeze_;
  Tensor x_, s_;
};

}  // namespace st
