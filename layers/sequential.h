// Containers: Sequential (a chain) and Residual (y = main(x) + shortcut(x), the
// residual Add of He et al. 2016). Both only route tensors; the children do the math.
#pragma once

#include "layers/layer.h"

namespace st {

// What both containers do with their children, written once: visiting parameters,
// buffers and layers, the training flag and the backward observer pass to each child
// under its path segment (an empty name is transparent).
class Container : public Layer {
 public:
  void visit_params(const std::string& prefix, const ParamVisitor& fn) override;
  void visit_buffers(const std::string& prefix, const BufferVisitor& fn) override;
  void set_training(bool training) override;
  void set_backward_observer(const BackwardObserver& obs, const std::string& prefix) override;
  void visit_layers(const std::function<void(Layer&)>& fn) override;
  // Containers only route: each child converts what it does not take.
  bool takes_blocked() const override { return true; }
  bool takes_bf16() const override { return true; }
  bool routes_on_host() const override { return true; }

 protected:
  // (path segment, child) in registration order.
  virtual std::vector<std::pair<std::string, Layer*>> children() = 0;
};

// A container whose forward and backward route through its children with device-generic
// operations (core/ops.h), written once for every device: on the emulated device they run
// on the host (routes_on_host), each child's work queued on the stream. Residual, Concat
// and SqueezeExcite.
class RoutingContainer : public Container {
 protected:
  virtual Tensor route_forward(const Tensor& x) = 0;
  virtual Tensor route_backward(const Tensor& dy) = 0;
  Tensor forward_cpu(const Tensor& x) final { return route_forward(x); }
  Tensor backward_cpu(const Tensor& dy) final { return route_backward(dy); }
  Tensor forward_cuda(const Tensor& x) final { return route_forward(x); }
  Tensor backward_cuda(const Tensor& dy) final { return route_backward(dy); }
};

class Sequential : public Container {
 public:
  // Appends a child. `name` becomes a path segment in parameter names; an empty name
  // makes the child transparent (its parameters appear directly under this prefix).
  Sequential& add(const std::string& name, LayerPtr layer);
  Sequential& add(LayerPtr layer) {
    return add(std::to_string(children_.size()), std::move(layer));
  }
  size_t size() const { return children_.size(); }
  Layer& child(size_t i) { return *children_[i].second; }

  std::string describe() const override { return "Sequential(" + std::to_string(size()) + ")"; }
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  // Also remembers each child's observer path for its own backward.
  void set_backward_observer(const BackwardObserver& obs, const std::string& prefix) override;

 protected:
  std::vector<std::pair<std::string, Layer*>> children() override;
  Tensor forward_cpu(const Tensor& x) override { return forward(x); }
  Tensor backward_cpu(const Tensor& dy) override { return backward(dy); }

 private:
  std::vector<std::pair<std::string, LayerPtr>> children_;
  BackwardObserver observer_;
  std::vector<std::string> paths_;  // observer names of the children
};

class Residual : public RoutingContainer {
 public:
  // `main` is transparent in names; `shortcut` (nullptr = identity) is named
  // `shortcut_name` ("downsample" in torchvision).
  Residual(LayerPtr main, LayerPtr shortcut = nullptr, std::string shortcut_name = "downsample");

  std::string describe() const override { return "Residual"; }

 protected:
  std::vector<std::pair<std::string, Layer*>> children() override;
  // The main path plus the shortcut, the add device-generic too.
  Tensor route_forward(const Tensor& x) override;
  Tensor route_backward(const Tensor& dy) override;

 private:
  LayerPtr main_, shortcut_;
  std::string shortcut_name_;
};

}  // namespace st
