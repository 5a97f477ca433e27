// A sparsifier added from outside the sparsetrain tree in one file: Top-k restricted to a
// fixed random mask. Each bucket gets, once, a random subset of about `keep` of its
// positions (the same on every rank: it depends only on the seed and the bucket); every
// step each rank sends its k largest |x| inside that subset, and the ranks' choices are
// unioned (union-allreduce). Positions outside the mask are never sent: error feedback
// keeps accumulating them. A teaching method: it shows what the hook does for a rule
// (error feedback, exchange, statistics) while the rule itself is a dozen lines.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include <sparsetrain/core/rng.h>
#include <sparsetrain/sparsify/registry.h>
#include <sparsetrain/sparsify/sparsifier.h>

namespace {

class MaskedTopK : public st::Sparsifier {
 public:
  explicit MaskedTopK(double keep) : keep_(keep) {}

  std::string name() const override { return "masked_topk"; }
  st::ExchangePattern pattern() const override { return st::ExchangePattern::UnionAllreduce; }

  // x stays behind `ops` (CPU or CUDA buckets): the mask goes to the device once per
  // bucket, and the top-k among its positions is one call of the threshold family.
  void select_on(st::bulk::Ops& ops, const st::SelectContext& ctx, const st::bulk::Buffer& x,
                 st::DeviceSelection& out) override {
    const std::vector<int32_t>& cand = mask(ctx, x.size());
    st::bulk::Buffer& on_device = mask_buffers_[ctx.bucket];
    if (on_device.size() != std::ssize(cand))
      ops.upload(cand.data(), st::bulk::Elem::I32, std::ssize(cand), on_device);
    const int64_t k = std::min<int64_t>(ctx.k, std::ssize(cand));
    st::bulk::need<st::bulk::ThresholdOps>(ops, name())
        .topk_abs_among(x, on_device, k, out.indices);
    ops.resize(out.values, st::bulk::Elem::F32, 0);  // union-allreduce reads x itself
  }

 private:
  // The bucket's mask: position i is in when its draw is below keep; never empty.
  const std::vector<int32_t>& mask(const st::SelectContext& ctx, int64_t n) {
    std::vector<int32_t>& m = masks_[ctx.bucket];
    if (!m.empty()) return m;
    st::Rng rng(ctx.seed * 1000003ull + static_cast<uint64_t>(ctx.bucket));
    for (int64_t i = 0; i < n; ++i)
      if (rng.uniform() < keep_) m.push_back(static_cast<int32_t>(i));
    if (m.empty()) m.push_back(0);
    return m;
  }

  double keep_;
  std::map<int, std::vector<int32_t>> masks_;
  std::map<int, st::bulk::Buffer> mask_buffers_;
};

// The whole registration: --sparsifier masked_topk --sp keep=0.25 now builds this method,
// checks its key and lists it in `sparsifiers_listing()`.
const st::SparsifierRegistrar kMaskedTopK({
    "masked_topk",
    "Top-k inside a fixed random mask per bucket (teaching example)",
    {},  // no paper
    {st::real("keep", 0.25, "(0, 1]", "fraction of each bucket's positions the mask lets through")},
    [](const st::SpValues& v) -> st::SparsifierPtr {
      return std::make_unique<MaskedTopK>(v.get("keep"));
    },
});

}  // namespace
