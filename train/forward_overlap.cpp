#include "train/forward_overlap.h"

#include <map>
#include <memory>
#include <vector>

#include "core/stream_sync.h"

namespace st {

std::string forward_overlap_blocker(const TrainConfig& c, bool clips_before_exchange,
                                    bool scales_loss) {
  if (!c.forward_overlap) return "";  // not asked for: nothing to announce
  if (!c.overlap) return "--no-overlap exchanges every bucket after backward";
  if (c.clip > 0 && !clips_before_exchange)
    return "--clip scales by the norm of the whole averaged gradient";
  if (!c.trace.empty())
    return "--trace gathers its timelines with collectives that would run beside the exchange";
  if (scales_loss)
    return "--precision fp16 skips an overflowed step only once every bucket is checked";
  return "";
}

Reducer::BucketUpdate bucket_update(Optimizer& optimizer) {
  // The optimiser's positions of each parameter, found once.
  auto position = std::make_shared<std::map<const Param*, size_t>>();
  for (size_t i = 0; i < optimizer.params().size(); ++i) (*position)[optimizer.params()[i]] = i;
  return [&optimizer, position](const Bucket& bucket) -> std::function<void()> {
    std::vector<size_t> which;
    for (const Param* p : bucket.params) {
      auto it = position->find(p);
      ST_CHECK(it != position->end(), "forward overlap: parameter ", p->name,
               " is not the optimiser's");
      which.push_back(it->second);
    }
    const float lr = optimizer.lr();
    const Device device = bucket.params.front()->value.device();
    return [&optimizer, which = std::move(which), lr, device] {
      optimizer.step_params(which, lr);
      // The next forward reads these values on the compute stream once this task is done.
      synchronize_current_stream(device);
    };
  };
}

}  // namespace st
