#include "sparsify/randomk.h"

#include <algorithm>
#include <numeric>

#include "core/rng.h"

namespace st {

void RandomK::draw(uint64_t seed, int bucket, int64_t t, int64_t n, int64_t k,
                   std::vector<int32_t>& out) {
  out.clear();
  if (n <= 0 || k <= 0) return;
  if (k >= n) {
    out.resize(n);
    std::iota(out.begin(), out.end(), 0);
    return;
  }
  // One Philox stream per (bucket, t); the tag keeps it apart from other users of seed.
  const uint64_t stream = (static_cast<uint64_t>(static_cast<uint32_t>(bucket)) << 40) ^
                          static_cast<uint64_t>(t) ^ 0x52414E444B000000ull;  // "RANDK"
  std::vector<uint64_t> taken((n + 63) / 64, 0);
  out.reserve(k);
  // Floyd: for j = n-k .. n-1 draw r in [0, j]; take r, or j when r is already taken.
  for (int64_t j = n - k; j < n; ++j) {
    const Philox4 w = philox_block(seed, stream, static_cast<uint64_t>(j));
    const uint64_t bits = (static_cast<uint64_t>(w.v[0]) << 32) | w.v[1];
    // Multiply-shift maps 64 random bits onto [0, j] (Lemire 2019); bias < 2^-30 here.
    int64_t r = static_cast<int64_t>(
        (static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(j + 1)) >> 64);
    if ((taken[r >> 6] >> (r & 63)) & 1) r = j;
    taken[r >> 6] |= uint64_t{1} << (r & 63);
    out.push_back(static_cast<int32_t>(r));
  }
  std::sort(out.begin(), out.end());
}

// The draw stays on the host: Floyd's algorithm is sequential (each draw consults the
// positions taken before it), costs O(k) with no pass over the bucket, and its result is
// a pure function of (seed, bucket, t, n, k) that must be identical on every rank
// whatever its device. Only the k sorted positions travel to the device, which is the
// size of any selection.
void RandomK::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                        DeviceSelection& out) {
  out.clear_scalars();
  ops.resize(out.values, bulk::Elem::F32, 0);
  draw(ctx.seed, ctx.bucket, ctx.iteration, x.size(), ctx.k, drawn_);
  ops.upload(drawn_.data(), bulk::Elem::I32, static_cast<int64_t>(drawn_.size()), out.indices);
}

}  // namespace st
