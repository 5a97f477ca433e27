#include "layers/embedding.h"

#include <cstring>
#include <vector>

#include "layers/init.h"

namespace st {

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Rng& rng, float init_range)
    : num_(num_embeddings), dim_(dim) {
  ST_CHECK(num_embeddings > 0 && dim > 0, "Embedding: sizes must be positive, got ", num_embeddings,
           " x ", dim);
  weight_ = &add_param("weight", Shape{num_, dim_}, ParamKind::Weight);
  weight_->provides_sq_grad = true;
  init::uniform(weight_->value, init_range, rng);
}

std::string Embedding::describe() const {
  return "Embedding(" + std::to_string(num_) + ", " + std::to_string(dim_) + ")";
}

Shape Embedding::output_shape(const Tensor& x) const {
  ST_CHECK(x.dtype() == DType::I32, describe(), ": expected int32 token ids, got ", x.str());
  std::vector<int64_t> dims = x.shape().dims();
  dims.push_back(dim_);
  return Shape(dims);
}

std::optional<TensorSpec> Embedding::output_spec(const Tensor& x) const {
  return TensorSpec{output_shape(x)};
}

Tensor Embedding::forward_cpu(const Tensor& x) {
  const Shape out_shape = output_shape(x);
  const int64_t n = x.numel();
  const int32_t* ids = x.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    ST_CHECK(ids[i] >= 0 && ids[i] < num_, describe(), ": token id ", ids[i], " at position ", i,
             " is outside [0, ", num_, ")");
  ids_ = x;
  Tensor y = Tensor::empty(out_shape);
  const float* w = weight_->value.f32();
  float* out = y.f32();
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * dim_, w + static_cast<int64_t>(ids[i]) * dim_, dim_ * sizeof(float));
  return y;
}

Tensor Embedding::backward_cpu(const Tensor& dy) {
  ST_CHECK(ids_.defined(), describe(), ": backward called before forward");
  const int64_t n = ids_.numel();
  expect_shape("gradient", output_shape(ids_), dy.shape());
  // dW[id] += dy[i] for every position i that looked up row id (repeats accumulate).
  const int32_t* ids = ids_.data<int32_t>();
  const float* g = dy.f32();
  float* dw = weight_->grad.f32();
  for (int64_t i = 0; i < n; ++i) {
    float* row = dw + static_cast<int64_t>(ids[i]) * dim_;
    const float* gi = g + i * dim_;
    for (int64_t j = 0; j < dim_; ++j) row[j] += gi[j];
  }
  // Opt-in per-sample squared-gradient sums (Param::sq_grad): a lookup is a sample, as a
  // row of Linear's input is; its term is dy[i] in row id, so the sum adds dy[i]^2 there.
  if (weight_->sq_grad.defined()) {
    float* sq = weight_->sq_grad.f32();
    for (int64_t i = 0; i < n; ++i) {
      float* row = sq + static_cast<int64_t>(ids[i]) * dim_;
      const float* gi = g + i * dim_;
      for (int64_t j = 0; j < dim_; ++j) row[j] += gi[j] * gi[j];
    }
  }
  weight_->mark_grad_ready();
  return Tensor();
}

}  // namespace st
