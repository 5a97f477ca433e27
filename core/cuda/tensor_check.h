// Argument checks shared by the CUDA layer implementations: every tensor a kernel
// touches must be float32 (or the stated dtype) on the same CUDA device.
#pragma once

#include <string>

#include "core/tensor.h"

namespace st::cuda {

// Throws "<who>: <what> is <t.str()>, expected <dtype> on <device>".
inline void expect_on(const std::string& who, const char* what, const Tensor& t, Device device,
                      DType dtype = DType::F32) {
  ST_CHECK(t.defined() && t.device() == device && t.dtype() == dtype, who, ": ", what, " is ",
           t.defined() ? t.str() : std::string("undefined"), ", expected ", dtype_name(dtype),
           " on ", device.str(), " (move the layer with to(device) first)");
}

}  // namespace st::cuda
