// Built when oneDNN is absent: Conv2d then always takes the im2col + GEMM path.
#include "core/error.h"
#include "core/kernels/conv_onednn.h"

namespace st::cpu {

bool onednn_built() {
  return false;
}

struct OneDnnConv::Impl {};
OneDnnConv::OneDnnConv(int64_t, int64_t, const ConvGeometry&, bool, bool, ConvDTypes) {
  ST_THROW("this sparsetrain was built without oneDNN (install libdnnl-dev)");
}
OneDnnConv::~OneDnnConv() = default;
bool OneDnnConv::matches(int64_t, const ConvGeometry&, ConvDTypes) const {
  return false;
}
std::string OneDnnConv::forward_impl() const {
  return "";
}
ConvDTypes OneDnnConv::io() const {
  return {};
}
bool OneDnnConv::writes_blocked_in_place() const {
  return false;
}
void OneDnnConv::forward(const void*, const float*, const float*, void*, const ConvLayouts&) {}
void OneDnnConv::backward(const void*, const float*, const void*, float*, float*, void*,
                          const ConvLayouts&) {}

}  // namespace st::cpu
