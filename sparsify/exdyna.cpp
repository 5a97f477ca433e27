#include "sparsify/exdyna.h"

#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"

namespace st {

ExDyna::ExDyna(const part::ThresholdRule& threshold, const part::BlockRule& blocks)
    : Micro(threshold), rule_(blocks) {}

namespace {
// The block rule's --sp keys, spelled once: keys() declares them, blocks_from() reads them.
constexpr char kBlocks[] = "blocks", kAlign[] = "align", kTol[] = "tol", kMinDiv[] = "min_div",
               kFill[] = "fill", kRef[] = "ref";
}  // namespace

std::vector<SpKey> ExDyna::keys() {
  const part::BlockRule rule;  // ExDyna's defaults
  std::vector<SpKey> keys = Micro::keys();
  for (SpKey& k : std::vector<SpKey>{
           whole(kBlocks, rule.blocks, "[1, inf)", "blocks per bucket"),
           whole(kAlign, rule.align, "[1, inf)", "block size rounded down to a multiple of this"),
           real(kTol, rule.tolerance, "[1, inf)",
                "load tolerance: high above tol k_acc, low below k_acc / tol"),
           real(kMinDiv, rule.min_div, "(0, inf)",
                "minimum partition: blocks / (min_div P) blocks"),
           flag(kFill, rule.fill, "not in the paper: floor(n / b) whole blocks, tail < one block"),
           flag(kRef, rule.reference,
                "reference arithmetic: k_acc = int(k_prev / P), low edge k_acc * 0.95238 "
                "(1 / tol to 5 decimals); 0: real values"),
       })
    keys.push_back(std::move(k));
  return keys;
}

part::BlockRule ExDyna::blocks_from(const SpValues& v) {
  part::BlockRule r;
  r.blocks = v.get_int(kBlocks);
  r.align = v.get_int(kAlign);
  r.tolerance = v.get(kTol);
  r.min_div = v.get(kMinDiv);
  r.fill = v.get_bool(kFill);
  r.reference = v.get_bool(kRef);
  return r;
}

const ExDyna::Layout& ExDyna::layout(int bucket) const {
  auto it = layouts_.find(bucket);
  ST_CHECK(it != layouts_.end(), "exdyna: bucket ", bucket, " has not been selected on yet");
  return it->second;
}

const part::BlockGrid& ExDyna::grid(int bucket) const {
  return layout(bucket).grid;
}
const std::vector<int64_t>& ExDyna::block_counts(int bucket) const {
  return layout(bucket).counts;
}
int64_t ExDyna::moves(int bucket) const {
  return layout(bucket).moves;
}

void ExDyna::start_bucket(int bucket, int64_t n, int world) {
  Layout& l = layouts_[bucket];
  l.grid = part::block_grid(n, world, rule_);
  l.counts.clear();
  if (l.grid.count > 0) {
    l.counts.resize(world);
    part::initial_block_counts(l.grid, world, l.counts.data());
  }
}

part::Range ExDyna::partition(int bucket, int p) const {
  const Layout& l = layout(bucket);
  if (l.counts.empty()) return Micro::partition(bucket, p);  // too small for blocks
  return part::block_partition(l.grid, l.counts.data(), static_cast<int>(l.counts.size()), p);
}

void ExDyna::adapt(const ExchangeFeedback& fb) {
  auto it = layouts_.find(fb.bucket);
  if (it == layouts_.end() || it->second.counts.empty()) return;
  Layout& l = it->second;
  const int P = static_cast<int>(l.counts.size());
  ST_CHECK(static_cast<int>(fb.rank_counts.size()) == P, "exdyna: feedback for bucket ", fb.bucket,
           " has ", fb.rank_counts.size(), " rank counts, expected ", P);
  // Rank r owned partition (t + r) mod P in the iteration just exchanged.
  std::vector<int64_t> loads(P);
  for (int p = 0; p < P; ++p) loads[p] = fb.rank_counts[part::owner_of(fb.iteration, p, P)];
  l.moves +=
      part::balance_sweep(rule_, l.grid, fb.n, P, fb.global_count, loads.data(), l.counts.data());
}

double ExDyna::state_signature(int bucket) const {
  // FNV-1a over tau's bits and the block counts, folded to 24 bits so the conformance
  // suite's float comparison sees every difference.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  const double tau = threshold(bucket);
  uint64_t bits;
  std::memcpy(&bits, &tau, 8);
  mix(bits);
  auto it = layouts_.find(bucket);
  if (it != layouts_.end())
    for (int64_t c : it->second.counts) mix(static_cast<uint64_t>(c));
  return static_cast<double>((h ^ (h >> 24) ^ (h >> 48)) & 0xFFFFFF);
}

void ExDyna::save_state(StateWriter& out) const {
  Micro::save_state(out);
  out.put_buckets(layouts_, [](StateWriter& w, const Layout& l) {
    w.put(l.grid);
    w.put_vector(l.counts);
    w.put(l.moves);
  });
}

void ExDyna::load_state(StateReader& in) {
  Micro::load_state(in);
  in.get_buckets(layouts_, [](StateReader& r, Layout& l) {
    l.grid = r.get<part::BlockGrid>();
    l.counts = r.get_vector<int64_t>();
    l.moves = r.get<int64_t>();
  });
  if (in.new_world() > 0) {
    // Another number of ranks: the block grid and the boundaries were balanced for the
    // old partitions, so they start again from near-equal block counts for the new world
    // (as a fresh bucket does) and the sweeps rebalance them; the move count goes on.
    for (auto& [id, l] : layouts_) {
      const int64_t moves = l.moves;
      start_bucket(id, bucket_rule(id).n, in.new_world());
      l.moves = moves;
    }
  }
  for (const auto& [id, l] : layouts_) check_layout(id, l, in.what());
}

// A loaded grid must tile its bucket (as block_grid() makes it) and its counts must
// split the grid's blocks among the ranks, or partitions would reach outside the bucket.
void ExDyna::check_layout(int bucket, const Layout& l, const std::string& what) const {
  const BucketRule& b = bucket_rule(bucket);
  const part::BlockGrid& g = l.grid;
  int64_t covered = 0;
  bool ok = g.count >= 0 && g.size >= 0 && g.tail >= 0 && l.moves >= 0 &&
            !__builtin_mul_overflow(g.size, g.count, &covered) && g.tail == b.n - covered;
  if (ok && g.count == 0) ok = g.size == 0 && l.counts.empty();
  if (ok && g.count > 0) {
    ok = g.size > 0 && static_cast<int>(l.counts.size()) == b.world;
    int64_t sum = 0;
    for (int64_t c : l.counts) {
      ok = ok && c >= 0 && c <= g.count - sum;
      if (ok) sum += c;
    }
    ok = ok && sum == g.count;
  }
  ST_CHECK(ok, what, ": exdyna bucket ", bucket, " has a block grid (size ", g.size, ", count ",
           g.count, ", tail ", g.tail, ") or block counts that do not tile its ", b.n,
           " elements on ", b.world, " ranks (corrupt sparsifier state)");
}

}  // namespace st
