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

void Sparsifier::unpack_on(bulk::Ops&, const SelectContext&, int64_t, const bulk::Buffer&, int64_t,
                           int64_t, DeviceSelection&) const {
  ST_THROW("--sparsifier ", name(), " declares a packed wire format but has no unpack_on()");
}

void Sparsifier::decode_on(bulk::Ops&, const SelectContext&, const bulk::Buffer&, int64_t,
                           bulk::Buffer&) {
  ST_THROW("--sparsifier ", name(), " has no decode_on() for its transform or low-rank pattern");
}

void Sparsifier::second_message_on(bulk::Ops&, const SelectContext&, const bulk::Buffer&,
                                   const bulk::Buffer&, bulk::Buffer&) {
  ST_THROW("--sparsifier ", name(), " has no second_message_on() for the low-rank pattern");
}

}  // namespace st
