// A point-wise activation layer, y[i] = Op::forward(x[i]), over one functor of
// core/kernels/pointwise_ops.h that the CPU loop and the CUDA kernel both call, so the
// backends compute the same formula. Any layout (the elementwise map keeps the input's);
// bfloat16 activations when the functor is exact in them. The layer keeps y or x for
// backward, as the functor says.
#pragma once

#include "core/kernels/pointwise_ops.h"
#include "layers/layer.h"

namespace st {

template <class Op>
class Pointwise : public Layer {
 public:
  ~Pointwise() override { finish_queued_work(); }  // its queued tasks read its members
  std::string describe() const override { return Op::kName; }
  bool takes_blocked() const override { return true; }
  bool takes_bf16() const override { return Op::kExactInBf16; }
  std::optional<TensorSpec> output_spec(const Tensor& x) const override { return taken_spec(x); }

 protected:
  ST_LAYER_CPU_AND_CUDA

 private:
  Tensor saved_;  // y or x (Op::kBackwardFromOutput)
};

// ReLU, Sigmoid, GELU, ...: defined once, in layers/pointwise.cpp (CPU) and
// layers/pointwise_cuda.cu (CUDA).
#define ST_POINTWISE_ALIAS(Name, Op)         \
  extern template class Pointwise<math::Op>; \
  using Name = Pointwise<math::Op>;
ST_POINTWISE_OPS(ST_POINTWISE_ALIAS)
#undef ST_POINTWISE_ALIAS

}  // namespace st
