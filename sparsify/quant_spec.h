// What a quantisation pass computes (bulk::Ops::quantize, the quantisation kernels): a
// plain struct below the device interface, so kernels take it without including it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sparsify/partition_math.h"

namespace st::bulk {

// What Ops::quantize computes. Groups share one scale: fixed chunks of `chunk` elements
// (the last one shorter) when chunk > 0, else the groups starting at `starts` (ascending,
// starts[0] = 0; the last one runs to the end).
enum class QuantKind : uint8_t {
  Qsgd,      // scale = L2 norm; code = level_code(qsgd_level(...), bits)
  TernGrad,  // scale = terngrad_scale(max |x|, sum, sum sq, len, clip); 2-bit level code
  Sign,      // scale = L1 norm / len (EF-signSGD); code = 1 when x < 0
};
struct QuantSpec {
  QuantKind kind = QuantKind::Qsgd;
  int64_t chunk = 0;
  std::vector<int64_t> starts;
  int32_t levels = 1;             // QSGD s
  float clip = 0;                 // TernGrad c (<= 0: off)
  uint64_t seed = 0, stream = 0;  // Philox key of the stochastic rounding (QSGD, TernGrad)
  // Bits of one code: QSGD sign + ceil(log2(s + 1)), TernGrad 2, Sign 1.
  int bits() const {
    if (kind != QuantKind::Qsgd) return kind == QuantKind::TernGrad ? 2 : 1;
    int b = 0;
    while ((int64_t{1} << b) < int64_t{levels} + 1) ++b;
    return 1 + b;
  }
  // The number of groups of n elements, and group g's range.
  int64_t groups(int64_t n) const {
    if (chunk > 0) return (n + chunk - 1) / chunk;
    return starts.empty() ? (n > 0 ? 1 : 0) : static_cast<int64_t>(starts.size());
  }
  part::Range group(int64_t g, int64_t n) const {
    if (chunk > 0) return {g * chunk, std::min(n, (g + 1) * chunk)};
    if (starts.empty()) return {0, n};
    const auto u = static_cast<size_t>(g);
    return {starts[u], u + 1 < starts.size() ? starts[u + 1] : n};
  }
};

}  // namespace st::bulk
