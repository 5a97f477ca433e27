#include "layers/concat.h"

#include "core/channel_ops.h"
#include "core/layout.h"
#include "core/ops.h"

namespace st {

namespace {
// A branch's [N, C] output as [N, C, 1, 1], so vectors join on channels as maps do.
Tensor as_planes(const Tensor& t) {
  return t.rank() == 2 ? t.reshape(Shape{t.dim(0), t.dim(1), 1, 1}) : t;
}
}  // namespace

Concat& Concat::add(const std::string& name, LayerPtr branch) {
  ST_CHECK(branch != nullptr, "Concat::add(", name, "): null branch");
  branches_.emplace_back(name, std::move(branch));
  return *this;
}

std::vector<std::pair<std::string, Layer*>> Concat::children() {
  std::vector<std::pair<std::string, Layer*>> out;
  for (auto& [name, branch] : branches_) out.emplace_back(name, branch.get());
  return out;
}

Tensor Concat::route_forward(const Tensor& x) {
  ST_CHECK(!branches_.empty(), describe(), ": no branches");
  std::vector<Tensor> ys;
  out_shapes_.clear();
  int64_t channels = 0;
  for (auto& [name, branch] : branches_) {
    const Tensor y_raw = to_plain(branch->forward(x));  // the join copies plain NCHW planes
    out_shapes_.push_back(y_raw.shape());
    ys.push_back(as_planes(y_raw));
    const Tensor& y = ys.back();
    ST_CHECK(y.rank() == 4 && y.dtype() == ys.front().dtype() && y.dim(0) == ys.front().dim(0) &&
                 y.dim(2) == ys.front().dim(2) && y.dim(3) == ys.front().dim(3),
             describe(), ": branch ", name, " gives ", y.str(), ", which does not join ",
             ys.front().str(), " on channels");
    ST_CHECK(y_raw.rank() == out_shapes_.front().rank(), describe(), ": branch ", name, " gives ",
             y_raw.str(), ", which does not join the first branch's rank-",
             out_shapes_.front().rank(), " output");
    channels += y.dim(1);
  }
  const Tensor& first = ys.front();
  Tensor out = Tensor::empty(Shape{first.dim(0), channels, first.dim(2), first.dim(3)},
                             first.dtype(), first.device());
  int64_t c0 = 0;
  for (const Tensor& y : ys) {
    copy_channels(out, c0, y, 0, y.dim(1));
    c0 += y.dim(1);
  }
  return out_shapes_.front().rank() == 2 ? out.reshape(Shape{first.dim(0), channels}) : out;
}

// Each branch gets its slice of dy; the input gradients of the branches add (branches
// over an input without a gradient, such as ids, return none).
Tensor Concat::route_backward(const Tensor& dy_in) {
  const Tensor dy = as_planes(to_plain(dy_in));
  ST_CHECK(!out_shapes_.empty(), describe(), ": backward without a forward");
  Tensor dx;
  int64_t c0 = 0;
  for (size_t i = 0; i < branches_.size(); ++i) {
    Tensor dy_i = Tensor::empty(out_shapes_[i], dy.dtype(), dy.device());
    Tensor dy_planes = as_planes(dy_i);
    copy_channels(dy_planes, 0, dy, c0, out_shapes_[i][1]);
    c0 += out_shapes_[i][1];
    Tensor g = branches_[i].second->backward(dy_i);
    if (!g.defined()) continue;
    if (!dx.defined()) {
      dx = g.shares_storage(dy_i) ? g.clone() : g;
    } else {
      add_inplace(dx, g);
    }
  }
  return dx;
}

}  // namespace st
