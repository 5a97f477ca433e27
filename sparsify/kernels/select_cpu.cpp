#include "sparsify/kernels/select_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace st::select {

namespace {

inline uint32_t abs_key(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u & 0x7FFFFFFFu;  // non-negative floats order like their bit patterns
}

inline float key_value(uint32_t key) {
  float v;
  std::memcpy(&v, &key, 4);
  return v;
}

constexpr int kShift = 20;  // 2048 bins over sign-free bits 30..20 (exponent + 3 mantissa bits)
constexpr int kBins = 1 << (31 - kShift);

// Concatenates per-thread vectors in thread order.
void concat(std::vector<std::vector<int32_t>>& parts, std::vector<int32_t>& out) {
  size_t total = out.size();
  for (auto& p : parts) total += p.size();
  out.reserve(total);
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
}

}  // namespace

float topk_abs(const float* x, int64_t n, int64_t k, std::vector<int32_t>& out) {
  out.clear();
  if (k <= 0 || n <= 0) return 0.0f;
  if (k >= n) {
    out.resize(n);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(i);
    return 0.0f;
  }
  const int threads = omp_get_max_threads();
  // Pass 1: histogram of the top bits of |x|.
  std::vector<int64_t> hist(kBins, 0);
  std::vector<std::vector<int64_t>> local(threads, std::vector<int64_t>(kBins, 0));
#pragma omp parallel num_threads(threads)
  {
    int64_t* h = local[omp_get_thread_num()].data();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) ++h[abs_key(x[i]) >> kShift];
  }
  for (const auto& h : local)
    for (int b = 0; b < kBins; ++b) hist[b] += h[b];
  // The boundary bin: everything above it is in, `need` more come from inside it.
  int boundary = kBins - 1;
  int64_t above = 0;
  while (boundary > 0 && above + hist[boundary] < k) above += hist[boundary--];
  const int64_t need = k - above;
  // Pass 2: keep every position above the boundary bin; collect the bin's candidates.
  std::vector<std::vector<int32_t>> sure(threads), cand(threads);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bin = abs_key(x[i]) >> kShift;
      if (bin > static_cast<uint32_t>(boundary)) {
        sure[t].push_back(static_cast<int32_t>(i));
      } else if (bin == static_cast<uint32_t>(boundary)) {
        cand[t].push_back(static_cast<int32_t>(i));
      }
    }
  }
  std::vector<int32_t> candidates;
  concat(cand, candidates);
  // The `need` largest candidates, ties to the lower index.
  auto larger = [x](int32_t a, int32_t b) {
    const uint32_t ka = abs_key(x[a]), kb = abs_key(x[b]);
    return ka != kb ? ka > kb : a < b;
  };
  std::nth_element(candidates.begin(), candidates.begin() + (need - 1), candidates.end(), larger);
  const float threshold = key_value(abs_key(x[candidates[need - 1]]));
  candidates.resize(need);
  // The sure positions come out ascending (static schedule: thread t's chunk precedes
  // t+1's), so only the boundary picks need sorting; a linear merge joins the two
  // instead of sorting all k (which cost as much as both passes at k = 1% of 25M).
  std::sort(candidates.begin(), candidates.end());
  concat(sure, out);
  const auto mid = static_cast<std::ptrdiff_t>(out.size());
  out.insert(out.end(), candidates.begin(), candidates.end());
  std::inplace_merge(out.begin(), out.begin() + mid, out.end());
  return threshold;
}

void abs_threshold(const float* x, int64_t begin, int64_t end, float tau, bool strict,
                   std::vector<int32_t>& out) {
  out.clear();
  const int64_t n = end - begin;
  if (n <= 0) return;
  const uint32_t key = abs_key(tau);
  if (n < (1 << 16)) {
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t kx = abs_key(x[i]);
      if (strict ? kx > key : kx >= key) out.push_back(static_cast<int32_t>(i));
    }
    return;
  }
  const int threads = omp_get_max_threads();
  std::vector<std::vector<int32_t>> parts(threads);
#pragma omp parallel num_threads(threads)
  {
    std::vector<int32_t>& p = parts[omp_get_thread_num()];
#pragma omp for schedule(static)
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t kx = abs_key(x[i]);
      if (strict ? kx > key : kx >= key) p.push_back(static_cast<int32_t>(i));
    }
  }
  concat(parts, out);
}

int64_t count_abs_ge(const float* x, int64_t begin, int64_t end, float tau) {
  const uint32_t key = abs_key(tau);
  int64_t c = 0;
#pragma omp parallel for reduction(+ : c) schedule(static) if (end - begin > 65536)
  for (int64_t i = begin; i < end; ++i) c += abs_key(x[i]) >= key;
  return c;
}

}  // namespace st::select

// --- Baseline helpers (issue 5). ---
namespace st::select {

int64_t count_abs(const float* x, int64_t begin, int64_t end, float tau, bool strict) {
  // Compare IEEE bit patterns of |x| (abs_key) so the loop is integer-only and vectorises.
  const uint32_t key = abs_key(tau) + (strict ? 1u : 0u);
  int64_t c = 0;
#pragma omp parallel for simd reduction(+ : c) schedule(static) if (end - begin > 65536)
  for (int64_t i = begin; i < end; ++i) c += abs_key(x[i]) >= key;
  return c;
}

// Sums over fixed 64K-element blocks, then the blocks in order: the result does not
// depend on the thread count (the file's determinism promise holds for floats too).
constexpr int64_t kSumBlock = 1 << 16;

Moments mean_std(const float* x, int64_t n) {
  Moments m;
  if (n <= 0) return m;
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> ps(blocks), pss(blocks);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    double s = 0, ss = 0;
    const int64_t end = std::min(n, (b + 1) * kSumBlock);
#pragma omp simd reduction(+ : s, ss)
    for (int64_t i = b * kSumBlock; i < end; ++i) {
      const double v = x[i];
      s += v;
      ss += v * v;
    }
    ps[b] = s;
    pss[b] = ss;
  }
  double s = 0, ss = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    s += ps[b];
    ss += pss[b];
  }
  m.mean = s / static_cast<double>(n);
  if (n > 1) m.variance = std::max(0.0, (ss - s * m.mean) / static_cast<double>(n - 1));
  return m;
}

AbsMeanMax abs_mean_max(const float* x, int64_t n) {
  AbsMeanMax r;
  if (n <= 0) return r;
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> ps(blocks);
  std::vector<float> pm(blocks);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    double s = 0;
    float mx = 0;
    const int64_t end = std::min(n, (b + 1) * kSumBlock);
#pragma omp simd reduction(+ : s) reduction(max : mx)
    for (int64_t i = b * kSumBlock; i < end; ++i) {
      const float a = key_value(abs_key(x[i]));
      s += a;
      mx = std::max(mx, a);
    }
    ps[b] = s;
    pm[b] = mx;
  }
  double s = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    s += ps[b];
    r.max = std::max(r.max, pm[b]);
  }
  r.mean = s / static_cast<double>(n);
  return r;
}

float topk_abs_among(const float* x, const std::vector<int32_t>& candidates, int64_t k,
                     std::vector<int32_t>& out) {
  out.clear();
  const int64_t c = static_cast<int64_t>(candidates.size());
  if (k <= 0 || c == 0) return 0.0f;
  if (k >= c) {
    out = candidates;
    float mn = key_value(abs_key(x[candidates[0]]));
    for (int32_t i : candidates) mn = std::min(mn, key_value(abs_key(x[i])));
    return mn;
  }
  // Gather the candidates' magnitudes densely and reuse the exact kernel on them; its
  // positions index `candidates`, which is ascending, so ties still go to the lower index.
  std::vector<float> gathered(c);
  for (int64_t j = 0; j < c; ++j) gathered[j] = x[candidates[j]];
  std::vector<int32_t> local;
  const float tau = topk_abs(gathered.data(), c, k, local);
  out.resize(local.size());
  for (size_t j = 0; j < local.size(); ++j) out[j] = candidates[local[j]];
  return tau;
}

}  // namespace st::select
