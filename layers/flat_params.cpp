#include "layers/flat_params.h"

namespace st {

FlatParams::FlatParams(Layer& model, Device device) : params_(collect_params(model)) {
  offsets_.assign(params_.size(), 0);
  int64_t total = 0;
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    offsets_[(*it)->index] = total;
    total += (*it)->value.numel();
  }
  values_ = Tensor::empty(Shape{total}, DType::F32, device);
  grads_ = Tensor::zeros(Shape{total}, DType::F32, device);
  for (Param* p : params_) {
    const Shape shape = p->value.shape();
    Tensor value = values_.slice_flat(offsets_[p->index], shape);
    value.copy_from(p->value);
    p->value = value;
    p->grad = grads_.slice_flat(offsets_[p->index], shape);
  }
}

}  // namespace st
