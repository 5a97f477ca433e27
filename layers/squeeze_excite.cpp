#include "layers/squeeze_excite.h"

#include "core/channel_ops.h"
#include "core/layout.h"
#include "core/ops.h"
#include "layers/conv2d.h"
#include "layers/pointwise.h"
#include "layers/pooling.h"

namespace st {

SqueezeExcite::SqueezeExcite(int64_t channels, int64_t reduced, Rng& rng)
    : channels_(channels), reduced_(reduced), squeeze_(std::make_unique<Sequential>()) {
  ST_CHECK(channels > 0 && reduced > 0, "SqueezeExcite: channels ", channels, " and reduced ",
           reduced, " must be positive");
  squeeze_->add("", std::make_unique<GlobalAvgPool2d>());
  squeeze_->add("fc1", std::make_unique<Conv2d>(channels, reduced, 1, 1, 0, /*bias=*/true, rng));
  squeeze_->add("", std::make_unique<ReLU>());
  squeeze_->add("fc2", std::make_unique<Conv2d>(reduced, channels, 1, 1, 0, /*bias=*/true, rng));
  squeeze_->add("", std::make_unique<Sigmoid>());
}

// The channel ops walk plain NCHW planes: a blocked input (core/layout.h) is made plain.
Tensor SqueezeExcite::route_forward(const Tensor& x_in) {
  const Tensor x = to_plain(x_in);
  ST_CHECK(x.rank() == 4 && x.dim(1) == channels_, describe(), ": expected an input [N, ",
           channels_, ", H, W], got ", x.str());
  x_ = x;
  s_ = squeeze_->forward(x);
  return channel_scale(x, s_);
}

Tensor SqueezeExcite::route_backward(const Tensor& dy_in) {
  const Tensor dy = to_plain(dy_in);
  ST_CHECK(s_.defined(), describe(), ": backward without a forward");
  Tensor dx = channel_scale(dy, s_);
  add_inplace(dx, squeeze_->backward(channel_dot(dy, x_)));
  return dx;
}

}  // namespace st
