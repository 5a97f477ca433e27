#include "sparsify/sparsifier.h"

#include "core/error.h"

namespace st {

const char* pattern_name(ExchangePattern p) {
  switch (p) {
    case ExchangePattern::UnionAllreduce:
      return "union-allreduce";
    case ExchangePattern::AllgatherSum:
      return "allgather-sum";
    case ExchangePattern::SharedIndices:
      return "shared-indices";
    case ExchangePattern::LeaderIndices:
      return "leader-indices";
    case ExchangePattern::Dense:
      return "dense";
    case ExchangePattern::LowRank:
      return "low-rank";
  }
  return "?";
}

// Adapter for methods that are not device-ready yet: select() on a host copy of x.
void Sparsifier::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                           DeviceSelection& out) {
  ST_CHECK(ops.device().is_cpu(), "--sparsifier ", name(), " runs on CPU buckets only");
  const int64_t n = x.size();
  std::vector<float> host(static_cast<size_t>(n));
  ops.download(x, 0, n, host.data());
  Selection sel;
  select(ctx, host.data(), n, sel);
  ops.upload(sel.indices.data(), bulk::Elem::I32, static_cast<int64_t>(sel.indices.size()),
             out.indices);
  ops.upload(sel.values.data(), bulk::Elem::F32, static_cast<int64_t>(sel.values.size()),
             out.values);
  ops.upload(sel.packed.data(), bulk::Elem::U32, static_cast<int64_t>(sel.packed.size()),
             out.packed);
  out.threshold = sel.threshold;
  out.partition_ms = sel.partition_ms;
  out.estimate_ms = sel.estimate_ms;
}

}  // namespace st
