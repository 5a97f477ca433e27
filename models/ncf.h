// NCF: neural collaborative filtering, the NeuMF model of He et al. 2017 (sec. 3.4, fig. 3)
// as the MLPerf recommendation reference defines it and MiCRO trains it on MovieLens-20M.
// Input: int32 [2, N], row 0 user ids and row 1 item ids; output: one logit per pair
// [N, 1], trained with binary cross-entropy on implicit feedback (layers/bce_with_logits.h).
//   mf:  user and item embeddings of `factors` (64), their element-wise product (GMF)
//   mlp: user and item embeddings of 128 each, joined to 256, then Linear 256->256, ReLU,
//        256->128, ReLU, 128->64, ReLU
//   the two branches joined (64 + 64) -> final Linear(128 -> 1)
// On MovieLens-20M (138,493 users, 26,744 items) that is 31,832,577 parameters.
// Initialisation as the reference: embeddings N(0, 0.01^2), the MLP's weights Glorot
// uniform, the final weight LeCun uniform, biases PyTorch's Linear default
// U(+-1/sqrt(fan_in)), which the reference leaves in place.
#pragma once

#include <cstdint>

#include "core/rng.h"
#include "layers/layer.h"

namespace st {

// MovieLens-20M after the reference's id mapping: users and items that rated / were rated.
inline constexpr int64_t kMl20mUsers = 138493;
inline constexpr int64_t kMl20mItems = 26744;

LayerPtr ncf(int64_t users, int64_t items, Rng& rng);

}  // namespace st
