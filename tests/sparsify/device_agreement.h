// What the device tests (the emulated device's and CUDA's hook against the CPU) agree on:
// which methods run bit for bit alike on every device, how many positions of two results
// differ, and a hook's residual as a vector.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "sparsify/sparsify_hook.h"

namespace st::test {

// Methods whose every decision is a comparison, a sort or a count: every device runs
// them bit for bit alike (sums over ranks of 1 or 2 values are exact too).
inline bool bit_exact(const std::string& method) {
  static const std::set<std::string> exact = {"dense",  "topk",           "gtopk",   "micro",
                                              "exdyna", "hard_threshold", "randomk", "cltk"};
  return exact.count(method) > 0;
}

// Positions where a and b differ by more than 1e-5 of the larger magnitude in a.
inline int64_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  float scale = 1e-30f;
  for (float v : a) scale = std::max(scale, std::abs(v));
  int64_t d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += std::abs(a[i] - b[i]) > 1e-5f * scale;
  return d;
}

// The hook's residual of `bucket` (n zeros before it has one).
inline std::vector<float> residual_of(const SparsifyHook& hook, int bucket, int64_t n) {
  const Tensor r = hook.residual(bucket);
  return r.defined() ? r.to_vector() : std::vector<float>(static_cast<size_t>(n), 0.0f);
}

}  // namespace st::test
