// Concat: parallel branches over one input, their outputs joined on the channel axis, as
// in the Inception module (Szegedy et al. 2015, fig. 2b), or vectors [N, C] joined into
// [N, sum C] (NCF's two branches, He et al. 2017, eq. 11). A container: each branch is a
// child under its own name, the join and the split are device-generic copies
// (core/channel_ops.h), so it runs on the CPU, the emulated device and CUDA alike.
#pragma once

#include "layers/sequential.h"

namespace st {

class Concat : public RoutingContainer {
 public:
  // Appends a branch; `name` becomes its path segment ("b1" in "a3.b1.0.weight").
  Concat& add(const std::string& name, LayerPtr branch);
  std::string describe() const override {
    return "Concat(" + std::to_string(branches_.size()) + " branches)";
  }

 protected:
  std::vector<std::pair<std::string, Layer*>> children() override;
  Tensor route_forward(const Tensor& x) override;
  Tensor route_backward(const Tensor& dy) override;

 private:
  std::vector<std::pair<std::string, LayerPtr>> branches_;
  std::vector<Shape> out_shapes_;  // each branch's output in the last forward
};

}  // namespace st
