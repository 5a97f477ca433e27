#include "layers/pair_embedding.h"

#include "core/channel_ops.h"
#include "layers/init.h"

namespace st {

namespace {
// [N, C] as [N, C, 1, 1]: the channel copies join and split on axis 1 of NCHW.
Tensor as_planes(const Tensor& t) {
  return t.reshape(Shape{t.dim(0), t.dim(1), 1, 1});
}
}  // namespace

PairEmbedding::PairEmbedding(int64_t users, int64_t items, int64_t dim, Rng& rng, float stddev)
    : user_(std::make_unique<Embedding>(users, dim, rng)),
      item_(std::make_unique<Embedding>(items, dim, rng)) {
  init::normal(user_->weight().value, stddev, rng);
  init::normal(item_->weight().value, stddev, rng);
}

std::string PairEmbedding::describe() const {
  return "PairEmbedding(" + std::to_string(user_->num_embeddings()) + " users, " +
         std::to_string(item_->num_embeddings()) + " items, " + std::to_string(user_->dim()) + ")";
}

std::vector<std::pair<std::string, Layer*>> PairEmbedding::children() {
  return {{"user", user_.get()}, {"item", item_.get()}};
}

Tensor PairEmbedding::route_forward(const Tensor& x) {
  ST_CHECK(x.dtype() == DType::I32 && x.rank() == 2 && x.dim(0) == 2, describe(),
           ": expected int32 [2, N] (row 0 users, row 1 items), got ", x.str());
  n_ = x.dim(1);
  const int64_t d = user_->dim();
  const Tensor u = user_->forward(x.slice_flat(0, Shape{n_}));
  const Tensor i = item_->forward(x.slice_flat(n_, Shape{n_}));
  Tensor out = Tensor::empty(Shape{n_, 2 * d}, DType::F32, u.device());
  Tensor planes = as_planes(out);
  copy_channels(planes, 0, as_planes(u), 0, d);
  copy_channels(planes, d, as_planes(i), 0, d);
  return out;
}

Tensor PairEmbedding::route_backward(const Tensor& dy) {
  ST_CHECK(n_ >= 0, describe(), ": backward without a forward");
  const int64_t d = user_->dim();
  expect_shape("gradient", Shape{n_, 2 * d}, dy.shape());
  const Tensor dy_planes = as_planes(dy);
  Tensor du = Tensor::empty(Shape{n_, d}, DType::F32, dy.device());
  Tensor di = Tensor::empty(Shape{n_, d}, DType::F32, dy.device());
  Tensor du_planes = as_planes(du), di_planes = as_planes(di);
  copy_channels(di_planes, 0, dy_planes, d, d);
  copy_channels(du_planes, 0, dy_planes, 0, d);
  item_->backward(di);  // reverse order of forward, as the gradients become ready
  user_->backward(du);
  return Tensor();
}

}  // namespace st
