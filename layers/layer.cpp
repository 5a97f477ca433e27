#include "layers/layer.h"

namespace st {

Tensor Layer::forward(const Tensor& x) {
  return x.device().is_cuda() ? forward_cuda(x) : forward_cpu(x);
}

Tensor Layer::backward(const Tensor& dy) {
  return dy.device().is_cuda() ? backward_cuda(dy) : backward_cpu(dy);
}

Tensor Layer::forward_cuda(const Tensor&) {
  ST_THROW(describe(), ": no CUDA implementation in this build");
}

Tensor Layer::backward_cuda(const Tensor&) {
  ST_THROW(describe(), ": no CUDA implementation in this build");
}

void Layer::visit_params(const std::string& prefix, const ParamVisitor& fn) {
  for (auto& [name, p] : params_) fn(prefix + name, *p);
}

void Layer::visit_buffers(const std::string& prefix, const BufferVisitor& fn) {
  for (auto& [name, b] : buffers_) fn(prefix + name, *b);
}

void Layer::to(Device device) {
  visit_params("", [&](const std::string&, Param& p) {
    p.value = p.value.to(device);
    p.grad = p.grad.to(device);
  });
  visit_buffers("", [&](const std::string&, Buffer& b) { b.value = b.value.to(device); });
}

Param& Layer::add_param(const std::string& local_name, const Shape& shape, ParamKind kind) {
  auto p = std::make_unique<Param>();
  p->value = Tensor::zeros(shape);
  p->grad = Tensor::zeros(shape);
  p->kind = kind;
  p->name = local_name;
  params_.emplace_back(local_name, std::move(p));
  return *params_.back().second;
}

Buffer& Layer::add_buffer(const std::string& local_name, const Tensor& value) {
  auto b = std::make_unique<Buffer>();
  b->value = value;
  b->name = local_name;
  buffers_.emplace_back(local_name, std::move(b));
  return *buffers_.back().second;
}

void Layer::expect_shape(const char* what, const Shape& want, const Shape& got) const {
  ST_CHECK(want == got, describe(), ": expected ", what, " shape ", want, ", got ", got);
}

void Layer::expect_rank(const Tensor& x, int rank, const char* layout) const {
  ST_CHECK(x.rank() == rank, describe(), ": expected a rank-", rank, " input ", layout,
           ", got shape ", x.shape());
}

std::vector<Param*> collect_params(Layer& model) {
  std::vector<Param*> out;
  model.visit_params("", [&](const std::string& name, Param& p) {
    p.name = name;
    p.index = static_cast<int>(out.size());
    out.push_back(&p);
  });
  return out;
}

std::vector<Buffer*> collect_buffers(Layer& model) {
  std::vector<Buffer*> out;
  model.visit_buffers("", [&](const std::string& name, Buffer& b) {
    b.name = name;
    out.push_back(&b);
  });
  return out;
}

int64_t count_params(Layer& model) {
  int64_t n = 0;
  for (Param* p : collect_params(model)) n += p->value.numel();
  return n;
}

}  // namespace st
