#include "layers/sequential.h"

#include "core/ops.h"

namespace st {

namespace {
std::string child_prefix(const std::string& prefix, const std::string& name) {
  return name.empty() ? prefix : prefix + name + ".";
}
}  // namespace

Sequential& Sequential::add(const std::string& name, LayerPtr layer) {
  ST_CHECK(layer != nullptr, "Sequential::add(", name, "): null layer");
  children_.emplace_back(name, std::move(layer));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& [name, layer] : children_) h = layer->forward(h);
  return h;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor g = dy;
  for (size_t i = children_.size(); i-- > 0;) {
    if (observer_) observer_(paths_[i], true);
    g = children_[i].second->backward(g);
    if (observer_) observer_(paths_[i], false);
  }
  return g;
}

void Container::visit_params(const std::string& prefix, const ParamVisitor& fn) {
  for (auto& [name, child] : children()) child->visit_params(child_prefix(prefix, name), fn);
}

void Container::visit_buffers(const std::string& prefix, const BufferVisitor& fn) {
  for (auto& [name, child] : children()) child->visit_buffers(child_prefix(prefix, name), fn);
}

void Container::set_training(bool training) {
  Layer::set_training(training);
  for (auto& [name, child] : children()) child->set_training(training);
}

void Container::set_backward_observer(const BackwardObserver& obs, const std::string& prefix) {
  for (auto& [name, child] : children())
    child->set_backward_observer(obs, child_prefix(prefix, name));
}

void Container::visit_layers(const std::function<void(Layer&)>& fn) {
  fn(*this);
  for (auto& [name, child] : children()) child->visit_layers(fn);
}

std::vector<std::pair<std::string, Layer*>> Sequential::children() {
  std::vector<std::pair<std::string, Layer*>> out;
  for (auto& [name, layer] : children_) out.emplace_back(name, layer.get());
  return out;
}

void Sequential::set_backward_observer(const BackwardObserver& obs, const std::string& prefix) {
  observer_ = obs;
  paths_.clear();
  for (auto& [name, layer] : children_) {
    const std::string path = child_prefix(prefix, name);
    paths_.push_back((path.empty() ? std::string() : path.substr(0, path.size() - 1)) +
                     (name.empty() ? layer->describe() : ""));
  }
  Container::set_backward_observer(obs, prefix);
}

Residual::Residual(LayerPtr main, LayerPtr shortcut, std::string shortcut_name)
    : main_(std::move(main)),
      shortcut_(std::move(shortcut)),
      shortcut_name_(std::move(shortcut_name)) {
  ST_CHECK(main_ != nullptr, "Residual: null main branch");
}

Tensor Residual::route_forward(const Tensor& x) {
  Tensor y = main_->forward(x);
  Tensor s = shortcut_ ? shortcut_->forward(x) : x;
  ST_CHECK(y.shape() == s.shape(), "Residual add: main branch gives shape ", y.shape(),
           " but shortcut gives ", s.shape());
  add_inplace(y, s);
  return y;
}

Tensor Residual::route_backward(const Tensor& dy) {
  // d(main + shortcut) = dy on both branches; their input gradients add.
  Tensor dx = main_->backward(dy);
  if (dx.shares_storage(dy)) dx = dx.clone();  // never accumulate into the caller's dy
  if (shortcut_) {
    add_inplace(dx, shortcut_->backward(dy));
  } else {
    add_inplace(dx, dy);
  }
  return dx;
}

std::vector<std::pair<std::string, Layer*>> Residual::children() {
  std::vector<std::pair<std::string, Layer*>> out = {{"", main_.get()}};
  if (shortcut_) out.emplace_back(shortcut_name_, shortcut_.get());
  return out;
}

}  // namespace st
