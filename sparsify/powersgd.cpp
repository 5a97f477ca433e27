#include "sparsify/powersgd.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace st {

namespace {
// The --sp keys, spelled once: keys() declares them, the constructor reads them.
constexpr char kRank[] = "rank", kMinSize[] = "min_size", kWarmStart[] = "warm_start";
}  // namespace

std::vector<SpKey> PowerSgd::keys() {
  return {
      whole(kRank, 2, "[1, inf)", "rank r of the approximation (the paper's CIFAR-10 setting: 2)"),
      whole(kMinSize, 0, "[0, inf)",
            "matrices with fewer elements are sent dense (vectors always are)"),
      flag(kWarmStart, true, "reuse last step's averaged Q (off: a fresh random Q each step)")};
}

PowerSgd::PowerSgd(const SpValues& v)
    : rank_(v.get_int(kRank)),
      min_size_(v.get_int(kMinSize)),
      warm_start_(v.get_bool(kWarmStart)) {}

std::vector<PowerSgd::Block> PowerSgd::layout(const SelectContext& ctx, int64_t n) const {
  std::vector<Block> blocks;
  auto add = [&](int64_t begin, int64_t len, int64_t rows) {
    Block b;
    b.begin = begin;
    b.rows = rows > 0 && len % rows == 0 ? rows : 1;
    b.cols = len / b.rows;
    const int64_t r = std::min({rank_, b.rows, b.cols});
    const bool smaller = r * (b.rows + b.cols) < len;
    b.rank = b.rows > 1 && b.cols > 1 && len >= min_size_ && smaller ? r : 0;
    if (b.rank == 0) b.rows = 1, b.cols = len;
    blocks.push_back(b);
  };
  if (ctx.segments.empty() || ctx.rows.size() != ctx.segments.size()) {
    int64_t rows = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
    while (rows > 1 && n % rows != 0) --rows;
    add(0, n, std::max<int64_t>(rows, 1));
    return blocks;
  }
  for (size_t j = 0; j < ctx.segments.size(); ++j) {
    const int64_t end = j + 1 < ctx.segments.size() ? ctx.segments[j + 1] : n;
    add(ctx.segments[j], end - ctx.segments[j], ctx.rows[j]);
  }
  return blocks;
}

void PowerSgd::orthogonalize(float* m, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    double sq = 0;
    for (int64_t i = 0; i < rows; ++i) sq += static_cast<double>(m[i * cols + c]) * m[i * cols + c];
    const float inv = static_cast<float>(1.0 / (std::sqrt(sq) + 1e-8));
    for (int64_t i = 0; i < rows; ++i) m[i * cols + c] *= inv;
    for (int64_t d = c + 1; d < cols; ++d) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i)
        dot += static_cast<double>(m[i * cols + c]) * m[i * cols + d];
      const float f = static_cast<float>(dot);
      for (int64_t i = 0; i < rows; ++i) m[i * cols + d] -= f * m[i * cols + c];
    }
  }
}

// Q starts as i.i.d. normal numbers drawn from (seed, bucket) only, so every rank holds
// the same Q; without warm start it is redrawn every step (stream includes t). Drawn on
// the host (q_size = sum (cols x rank): small) and uploaded.
PowerSgd::State& PowerSgd::state(bulk::Ops& ops, const SelectContext& ctx,
                                 const std::vector<Block>& blocks) {
  int64_t q_size = 0;
  for (const Block& b : blocks) q_size += b.cols * b.rank;
  State& s = state_[ctx.bucket];
  if (s.q.size() == q_size && !s.q.empty() && warm_start_) {
    s.q.bind(ops, q_size);
    return s;
  }
  ST_CHECK(s.q.empty() || !warm_start_, "powersgd: bucket ", ctx.bucket, " changed layout (",
           s.q.size(), " warm-start values, now ", q_size, ")");
  const uint64_t stream = (static_cast<uint64_t>(static_cast<uint32_t>(ctx.bucket)) << 40) ^
                          (warm_start_ ? 0 : static_cast<uint64_t>(ctx.iteration)) ^
                          0x504F57455253ull;  // "POWERS"
  std::vector<float> q(static_cast<size_t>(q_size));
  for (int64_t i = 0; i < q_size; ++i) {
    const float u1 = std::max(philox_uniform(ctx.seed, stream, 2 * i), 1e-7f);
    const float u2 = philox_uniform(ctx.seed, stream, 2 * i + 1);
    q[static_cast<size_t>(i)] = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  }
  s.q.assign(ops, q);
  return s;
}

void PowerSgd::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                         DeviceSelection& out) {
  bulk::LowRankOps& low_rank = bulk::need<bulk::LowRankOps>(ops, name());
  const std::vector<Block> blocks = layout(ctx, x.size());
  State& s = state(ops, ctx, blocks);
  int64_t p_size = 0;
  for (const Block& b : blocks) p_size += b.rows * b.rank;
  ops.resize(out.values, bulk::Elem::F32, p_size);
  ops.fill(out.values, {0, p_size}, 0.0f);
  ops.resize(out.indices, bulk::Elem::I32, 0);
  int64_t p = 0, q = 0;
  for (const Block& b : blocks) {
    if (b.rank == 0) continue;
    low_rank.gemm(false, false, b.rows, b.rank, b.cols, 1.0f, x, b.begin, s.q.buf(), q, 0.0f,
                  out.values,
                  p);  // P = M Q
    p += b.rows * b.rank;
    q += b.cols * b.rank;
  }
}

// P^ = Gram-Schmidt of the summed P, block by block. P has rows x rank entries per block
// (a few thousand floats), and the columns are orthogonalised one after another: the
// host does it between one download and one upload, where a device would run rank^2
// tiny dependent passes.
void PowerSgd::second_message_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                                 const bulk::Buffer& first_sum, bulk::Buffer& out) {
  bulk::LowRankOps& low_rank = bulk::need<bulk::LowRankOps>(ops, name());
  const std::vector<Block> blocks = layout(ctx, x.size());
  State& s = state_.at(ctx.bucket);
  int64_t p_size = 0, q_size = 0, dense = 0;
  for (const Block& b : blocks) {
    p_size += b.rows * b.rank;
    q_size += b.cols * b.rank;
    dense += b.rank == 0 ? b.cols : 0;
  }
  s.host.resize(static_cast<size_t>(p_size));
  ops.download(first_sum, 0, p_size, s.host.data());
  float* ph = s.host.data();
  for (const Block& b : blocks) {
    if (b.rank == 0) continue;
    orthogonalize(ph, b.rows, b.rank);
    ph += b.rows * b.rank;
  }
  ops.upload(s.host.data(), bulk::Elem::F32, p_size, s.phat);
  ops.resize(out, bulk::Elem::F32, q_size + dense);
  int64_t p = 0, q = 0, d = q_size;
  for (const Block& b : blocks) {
    if (b.rank == 0) {
      ops.copy(x, b.begin, out, d, b.cols);
      d += b.cols;
      continue;
    }
    low_rank.gemm(true, false, b.cols, b.rank, b.rows, 1.0f, x, b.begin, s.phat, p, 0.0f, out,
                  q);  // M^T P^
    p += b.rows * b.rank;
    q += b.cols * b.rank;
  }
}

void PowerSgd::decode_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& coeffs,
                         int64_t n, bulk::Buffer& out) {
  bulk::LowRankOps& low_rank = bulk::need<bulk::LowRankOps>(ops, name());
  const std::vector<Block> blocks = layout(ctx, n);
  State& s = state_.at(ctx.bucket);
  int64_t q_size = 0;
  for (const Block& b : blocks) q_size += b.cols * b.rank;
  ops.resize(out, bulk::Elem::F32, n);
  int64_t p = 0, q = 0, d = q_size;
  for (const Block& b : blocks) {
    if (b.rank == 0) {
      ops.copy(coeffs, d, out, b.begin, b.cols);
      d += b.cols;
      continue;
    }
    low_rank.gemm(false, true, b.rows, b.cols, b.rank, 1.0f, s.phat, p, coeffs, q, 0.0f, out,
                  b.begin);  // P^ Q^T
    p += b.rows * b.rank;
    q += b.cols * b.rank;
  }
}

// Warm start: the next step's Q is this step's average Q (identical on every rank), copied
// on the device by the Ops of this exchange.
void PowerSgd::observe(const ExchangeFeedback& fb) {
  if (!warm_start_ || fb.summed_buffer == nullptr) return;
  State& s = state_.at(fb.bucket);
  bulk::Ops* ops = s.q.ops();
  ST_CHECK(ops != nullptr, "powersgd: feedback for bucket ", fb.bucket, " before its selection");
  const int64_t q_size = s.q.size();
  const float inv = 1.0f / static_cast<float>(std::max<size_t>(1, fb.rank_counts.size()));
  ST_CHECK(fb.summed_size >= q_size, "powersgd: summed message of ", fb.summed_size, " floats for ",
           q_size, " warm-start values");
  ops->copy(*fb.summed_buffer, 0, s.q.buf(), 0, q_size);
  ops->scale(s.q.buf(), {0, q_size}, inv);
}

double PowerSgd::state_signature(int bucket) const {
  auto it = state_.find(bucket);
  if (it == state_.end()) return 0.0;
  double sum = 0;
  for (float v : it->second.q.host()) sum += v;
  return sum;
}

void PowerSgd::save_state(StateWriter& out) const {
  out.put_buckets(state_, [](StateWriter& w, const State& s) { s.q.save(w); });
}

void PowerSgd::load_state(StateReader& in) {
  in.get_buckets(state_, [](StateReader& r, State& s) { s.q.load(r); });
}

}  // namespace st
