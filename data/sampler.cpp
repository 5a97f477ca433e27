#include "data/sampler.h"

#include <algorithm>
#include <new>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/rng.h"

namespace st {
namespace {
constexpr uint64_t kShuffleStream = 0x5348'5546'0000'0000ull;  // "SHUF" + epoch
}

DistributedSampler::DistributedSampler(int64_t dataset_size, SamplerOptions options)
    : size_(dataset_size), opt_(options) {
  ST_CHECK(opt_.world_size >= 1 && opt_.rank >= 0 && opt_.rank < opt_.world_size, "sampler: rank ",
           opt_.rank, " is outside world size ", opt_.world_size);
  ST_CHECK(size_ > 0, "sampler: dataset is empty");
  const int64_t w = opt_.world_size;
  // PyTorch: drop_last rounds down, otherwise up (the remainder is padded).
  num_samples_ = opt_.drop_last ? size_ / w : (size_ + w - 1) / w;
  ST_CHECK(num_samples_ > 0, "sampler: ", size_, " examples cannot be split over ", w,
           " ranks with drop_last");
}

int64_t DistributedSampler::real_samples() const {
  // Positions rank, rank + w, ... below the dataset size are real; with drop_last all are.
  const int64_t w = opt_.world_size;
  const int64_t real = size_ > opt_.rank ? (size_ - opt_.rank + w - 1) / w : 0;
  return std::min(real, num_samples_);
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all;
  try {
    all.resize(static_cast<size_t>(size_));
  } catch (const std::bad_alloc&) {
    // Named here: a bare std::bad_alloc would not say which size was too large.
    ST_THROW("sampler: the order of an epoch of ", size_, " examples needs ",
             static_cast<double>(size_) * sizeof(int64_t) / (1 << 20),
             " MiB, more memory than this process can allocate (fewer examples, e.g. a smaller "
             "--synthetic-size or --train-subset)");
  }
  std::iota(all.begin(), all.end(), int64_t{0});
  if (opt_.shuffle) {
    // Fisher-Yates; the draws depend only on (seed, epoch), so all ranks agree.
    Rng rng;
    rng.set_state(opt_.seed, kShuffleStream + static_cast<uint64_t>(epoch));
    for (int64_t i = size_ - 1; i > 0; --i)
      std::swap(all[i], all[rng.below(static_cast<uint32_t>(i + 1))]);
  }
  const int64_t total = total_size();
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  // Position p of the padded list is all[p % size_]: wrapping around repeats the head.
  for (int64_t p = opt_.rank; p < total; p += opt_.world_size) mine.push_back(all[p % size_]);
  return mine;
}

}  // namespace st
