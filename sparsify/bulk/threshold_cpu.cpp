// CpuOps: the threshold extras (op_list.h, ST_BULK_THRESHOLD_OPS): counts, MiCRO's
// partition select, the sampled top-k, SIDCo's stage moments and exceedance compaction.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/kernels/select_cpu.h"
#include "sparsify/kernels/threshold_select_cpu.h"

namespace st::bulk {

namespace {

constexpr int64_t kBlock = kMomentBlock;

// Moments over [0, n) of fixed blocks, each reduced by f(begin, end, moments) in
// parallel and added in block order: the result does not depend on the thread count.
template <class F>
sidco::Moments reduce_blocks(int64_t n, F f) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<sidco::Moments> part(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) f(b * kBlock, std::min(n, (b + 1) * kBlock), part[b]);
  sidco::Moments m;
  for (const sidco::Moments& p : part) m.add(p);
  return m;
}

// Moments of the exceedances |v| > tau over [b, end): branch-free and all in float inside
// the block (the form GCC vectorises: ~1.35x a plain streaming pass; mixed
// int/float/double stays scalar at ~3.5x). With the SIMD lanes each summing a few
// thousand values, the relative rounding error is ~1e-6, far below what moves a fitted
// threshold; blocks are combined in double.
sidco::Moments exceed_block(const float* v, int64_t b, int64_t end, float tau) {
  const float inf = std::numeric_limits<float>::infinity();
  float c = 0, s = 0, q = 0, mn = inf;
#pragma omp simd reduction(+ : c, s, q) reduction(min : mn)
  for (int64_t i = b; i < end; ++i) {
    const float a = std::abs(v[i]);
    const float hit = a > tau ? 1.0f : 0.0f;
    const float d = a * hit;
    c += hit;
    s += d;
    q += d * d;
    mn = std::min(mn, a > tau ? a : inf);
  }
  sidco::Moments m;
  m.count = static_cast<int64_t>(c);
  m.sum = s;
  m.sumsq = q;
  m.min = c > 0 ? mn : std::numeric_limits<double>::infinity();
  return m;
}

// Sum and sum of squares of |v| over [b, end), in float inside the block as exceed_block.
sidco::Moments all_block(const float* v, int64_t b, int64_t end) {
  float s = 0, q = 0;
#pragma omp simd reduction(+ : s, q)
  for (int64_t i = b; i < end; ++i) {
    const float a = std::abs(v[i]);
    s += a;
    q += a * a;
  }
  sidco::Moments m;
  m.count = end - b;
  m.sum = s;
  m.sumsq = q;
  return m;
}

}  // namespace

sidco::Moments CpuOps::exceed_moments(const Buffer& x, part::Range r, float tau, double log_scale) {
  check::range("exceed_moments", x.size(), r);
  const float* v = f32(x) + r.begin;
  if (tau < 0 && log_scale > 0)
    return reduce_blocks(r.size(), [v, log_scale](int64_t b, int64_t end, sidco::Moments& m) {
      double s = 0;
      for (int64_t i = b; i < end; ++i) s += sidco::log_term(v[i], log_scale);
      m.sumlog = s;
    });
  if (tau < 0)
    return reduce_blocks(
        r.size(), [v](int64_t b, int64_t end, sidco::Moments& m) { m = all_block(v, b, end); });
  return reduce_blocks(r.size(), [v, tau](int64_t b, int64_t end, sidco::Moments& m) {
    m = exceed_block(v, b, end, tau);
  });
}

// One pass over cache-sized blocks: each block's moments, then its hits and their values
// compacted with the shared SIMD kernel (select::compact_abs_ge) while the block is still
// in cache; the blocks' hits are joined in block order, so the output is ascending and
// independent of the thread count, and x is not read a second time.
sidco::Moments CpuOps::exceed_compact(const Buffer& x, part::Range r, float tau, const Buffer* pos,
                                      Buffer& out_idx, Buffer& out_vals) {
  check::range("exceed_compact", x.size(), r);
  check::positions_cover(pos, r);
  const float* v = f32(x);
  const int64_t len = r.size(), nb = (len + kBlock - 1) / kBlock;
  std::vector<std::vector<int32_t>>& parts = block_hits_;
  if (static_cast<int64_t>(parts.size()) < nb) parts.resize(static_cast<size_t>(nb));
  // The blocks' values keep their memory from call to call, as block_hits_ does.
  static thread_local std::vector<std::vector<float>> caller_vals;
  std::vector<std::vector<float>>& part_vals = caller_vals;
  if (static_cast<int64_t>(part_vals.size()) < nb) part_vals.resize(static_cast<size_t>(nb));
  const int64_t first = r.begin;
  // |x| > tau  <=>  abs_key(x) >= abs_key(tau) + 1.
  const uint32_t key = part::abs_key(tau) + 1u;
  const sidco::Moments m = reduce_blocks(
      len, [&parts, &part_vals, v, tau, first, key](int64_t b, int64_t end, sidco::Moments& mb) {
        mb = exceed_block(v + first, b, end, tau);
        select::compact_abs_ge(v, first + b, first + end, key, parts[b / kBlock],
                               &part_vals[b / kBlock]);
      });
  std::vector<int64_t> offset(static_cast<size_t>(nb) + 1, 0);
  for (int64_t b = 0; b < nb; ++b) offset[b + 1] = offset[b] + parts[b].size();
  resize(out_idx, Elem::I32, offset[nb]);
  resize(out_vals, Elem::F32, offset[nb]);
  int32_t* cand = i32(out_idx);
  float* vals = f32(out_vals);
  const int32_t* old = pos ? i32(*pos) : nullptr;
#pragma omp parallel for schedule(static) if (nb > 1)
  for (int64_t b = 0; b < nb; ++b) {
    const std::vector<int32_t>& p = parts[b];
    const int64_t o = offset[b], c = static_cast<int64_t>(p.size());
    std::copy(part_vals[b].begin(), part_vals[b].end(), vals + o);
    if (old)
      for (int64_t j = 0; j < c; ++j) cand[o + j] = old[p[j]];
    else
      std::copy(p.begin(), p.end(), cand + o);
  }
  return m;
}

int64_t CpuOps::count_abs(const Buffer& x, part::Range r, float tau, bool strict) {
  check::range("count_abs", x.size(), r);
  return select::count_abs(f32(x), r.begin, r.end, tau, strict);
}

void CpuOps::threshold_select(const Buffer& x, part::Range owned, float tau, int64_t t,
                              Buffer& out) {
  check::range("threshold_select", x.size(), owned);
  select::threshold_select_cpu(f32(x), owned, tau, t, scratch_);
  put_indices(scratch_, out);
}

float CpuOps::topk_abs_among(const Buffer& x, const Buffer& candidates, int64_t k, Buffer& out) {
  const int32_t* c = i32(candidates);
  scratch2_.assign(c, c + candidates.size());
  const float tau = select::topk_abs_among(f32(x), scratch2_, k, scratch_);
  put_indices(scratch_, out);
  return tau;
}

}  // namespace st::bulk
