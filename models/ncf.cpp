#include "models/ncf.h"

#include <cmath>

#include "layers/concat.h"
#include "layers/halves_product.h"
#include "layers/init.h"
#include "layers/linear.h"
#include "layers/pair_embedding.h"
#include "layers/pointwise.h"
#include "layers/sequential.h"

namespace st {

namespace {

constexpr int64_t kFactors = 64;                      // GMF's latent size (MLPerf: --factors 64)
constexpr int64_t kMlpSizes[] = {256, 256, 128, 64};  // MLPerf: --layers 256 256 128 64
constexpr float kEmbeddingStd = 0.01f;

// U(-sqrt(6 / (fan_in + fan_out)), +...) (Glorot and Bengio 2010).
std::unique_ptr<Linear> glorot_linear(int64_t in, int64_t out, Rng& rng) {
  auto fc = std::make_unique<Linear>(in, out, true, rng);
  init::uniform(fc->weight().value, std::sqrt(6.0f / static_cast<float>(in + out)), rng);
  return fc;
}

// U(-sqrt(3 / fan_in), +...) (LeCun et al. 1998).
std::unique_ptr<Linear> lecun_linear(int64_t in, int64_t out, Rng& rng) {
  auto fc = std::make_unique<Linear>(in, out, true, rng);
  init::uniform(fc->weight().value, std::sqrt(3.0f / static_cast<float>(in)), rng);
  return fc;
}

LayerPtr gmf_branch(int64_t users, int64_t items, Rng& rng) {
  auto mf = std::make_unique<Sequential>();
  mf->add("embed", std::make_unique<PairEmbedding>(users, items, kFactors, rng, kEmbeddingStd));
  mf->add("product", std::make_unique<HalvesProduct>());
  return mf;
}

// The first size is the joined embedding's: each table holds half of it.
LayerPtr mlp_branch(int64_t users, int64_t items, Rng& rng) {
  auto mlp = std::make_unique<Sequential>();
  mlp->add("embed",
           std::make_unique<PairEmbedding>(users, items, kMlpSizes[0] / 2, rng, kEmbeddingStd));
  for (size_t i = 0; i + 1 < std::size(kMlpSizes); ++i) {
    mlp->add(std::to_string(i), glorot_linear(kMlpSizes[i], kMlpSizes[i + 1], rng));
    mlp->add("relu" + std::to_string(i), std::make_unique<ReLU>());
  }
  return mlp;
}

}  // namespace

LayerPtr ncf(int64_t users, int64_t items, Rng& rng) {
  ST_CHECK(users > 0 && items > 0, "ncf: users and items must be positive, got ", users, " and ",
           items);
  auto branches = std::make_unique<Concat>();
  branches->add("mf", gmf_branch(users, items, rng));
  branches->add("mlp", mlp_branch(users, items, rng));
  auto model = std::make_unique<Sequential>();
  model->add("", std::move(branches));
  model->add("final", lecun_linear(kFactors + kMlpSizes[std::size(kMlpSizes) - 1], 1, rng));
  return model;
}

}  // namespace st
