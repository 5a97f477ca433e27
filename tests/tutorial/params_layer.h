// A layer of bare parameters p0, p1, ... of the given sizes, registered in that order, so
// the flat gradient buffer (reverse order) holds them last first. Forward and backward do
// nothing: the tutorial's tests announce readiness themselves, in the order they choose.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace st::test {

inline std::string param_name(size_t i) {
  char name[32];
  std::snprintf(name, sizeof name, "p%zu", i);
  return name;
}

class ParamsLayer : public Layer {
 public:
  explicit ParamsLayer(const std::vector<long>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i)
      p_.push_back(&add_param(param_name(i), Shape{sizes[i]}, ParamKind::Weight));
  }
  std::string describe() const override { return "ParamsLayer"; }
  Param& p(size_t i) { return *p_[i]; }

 protected:
  Tensor forward_cpu(const Tensor& x) override { return x; }
  Tensor backward_cpu(const Tensor& dy) override { return dy; }

 private:
  std::vector<Param*> p_;
};

}  // namespace st::test
