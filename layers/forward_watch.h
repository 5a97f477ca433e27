// A look at each layer's output as its forward returns it on the CPU, for tools that
// describe a model (models/summary.cpp: every layer's output shape, as torchinfo's
// forward hooks give it). The watch sees the forwards of the thread that made it, while
// it lives; training never makes one, so a forward pays one thread-local read.
#pragma once

#include <functional>

#include "core/tensor.h"

namespace st {

class Layer;

class ForwardWatch {
 public:
  using Fn = std::function<void(const Layer& layer, const Tensor& y)>;
  explicit ForwardWatch(Fn fn);
  ~ForwardWatch();
  ForwardWatch(const ForwardWatch&) = delete;
  ForwardWatch& operator=(const ForwardWatch&) = delete;

  // Called by Layer::forward with the layer and the output it returns.
  static void notify(const Layer& layer, const Tensor& y);

 private:
  Fn fn_;
  ForwardWatch* previous_;  // a watch made earlier on this thread, active again after this one
};

}  // namespace st
