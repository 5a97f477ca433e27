#include "sparsify/kernels/select_cpu.h"

#include <omp.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>

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

// Writes the positions in [begin, end) with abs_key(x[i]) >= key, in order, to idx (and
// x at them to val when kVals) and returns their count. Both outputs need 16 slots of
// slack past the count: the SIMD path stores whole vectors.
// With AVX-512 (the -march=native default on these machines) 16 lanes are compared into
// a mask and the passing positions compressed in a register and stored in one step,
// without a branch per element or per block, so the pass costs about one read of x even
// at d = 1%. The register form of vpcompressd and a plain store are used instead of the
// memory form (_mm512_mask_compressstoreu_*), which Zen 4 runs as slow microcode.
// Elsewhere a block of 32 is first tested with an OR (vectorised by the compiler) and only
// blocks holding a hit are walked.
template <bool kVals>
int64_t scan_block(const float* x, int64_t begin, int64_t end, uint32_t key, int32_t* idx,
                   float* val) {
  int64_t i = begin, size = 0;
#if defined(__AVX512F__)
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i keys = _mm512_set1_epi32(static_cast<int32_t>(key));
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (; i + 16 <= end; i += 16) {
    const __m512i raw = _mm512_loadu_si512(x + i);
    const __mmask16 m = _mm512_cmpge_epu32_mask(_mm512_and_si512(raw, abs_mask), keys);
    const __m512i pos = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int32_t>(i)));
    _mm512_storeu_si512(idx + size, _mm512_maskz_compress_epi32(m, pos));
    if constexpr (kVals) _mm512_storeu_si512(val + size, _mm512_maskz_compress_epi32(m, raw));
    size += __builtin_popcount(m);
  }
#else
  constexpr int64_t kBlock = 32;
  for (; i + kBlock <= end; i += kBlock) {
    uint32_t any = 0;
    for (int64_t j = 0; j < kBlock; ++j) any |= abs_key(x[i + j]) >= key;
    if (!any) continue;
    for (int64_t j = i; j < i + kBlock; ++j)
      if (abs_key(x[j]) >= key) {
        if constexpr (kVals) val[size] = x[j];
        idx[size++] = static_cast<int32_t>(j);
      }
  }
#endif
  for (; i < end; ++i)
    if (abs_key(x[i]) >= key) {
      if constexpr (kVals) val[size] = x[i];
      idx[size++] = static_cast<int32_t>(i);
    }
  return size;
}

// One thread's compacted output. Grow-only and never value-initialised: a std::vector's
// resize would write zeros over what the compress-store then overwrites, a second pass
// over the output, and fresh memory costs a page fault per 4 KB, which two threads
// faulting at once serialise in the kernel (at d = 1% of 25M that doubled the pass).
struct Chunk {
  std::unique_ptr<int32_t[]> idx;
  std::unique_ptr<float[]> val;
  int64_t cap = 0, val_cap = 0, size = 0;

  template <class T>
  static void grow(std::unique_ptr<T[]>& p, int64_t& c, int64_t keep, int64_t need) {
    if (need <= c) return;
    const int64_t want = std::max(need, 2 * c);
    std::unique_ptr<T[]> q(new T[static_cast<size_t>(want)]);
    if (keep > 0) std::memcpy(q.get(), p.get(), static_cast<size_t>(keep) * sizeof(T));
    p.swap(q);
    c = want;
  }
};

// Compacts [begin, end) into c in steps of 4096, making room for a whole step first, so the
// SIMD loop runs without a capacity check.
template <bool kVals>
void scan_chunk(const float* x, int64_t begin, int64_t end, uint32_t key, Chunk& c) {
  constexpr int64_t kStep = 4096;
  c.size = 0;
  for (int64_t b = begin; b < end; b += kStep) {
    const int64_t e = std::min(end, b + kStep), need = c.size + (e - b) + 16;
    Chunk::grow(c.idx, c.cap, c.size, need);
    if constexpr (kVals) Chunk::grow(c.val, c.val_cap, c.size, need);
    c.size += scan_block<kVals>(x, b, e, key, c.idx.get() + c.size,
                                kVals ? c.val.get() + c.size : nullptr);
  }
}

// [begin, end) in equal contiguous pieces, one per thread, each compacted into its own
// chunk in one pass over x; then one prefix sum of the counts and a copy of each chunk to
// its offset: ascending, and independent of the thread count. The copy runs after the
// parallel region rather than inside it: it moves d n values (1 MB at d = 1% of 25M,
// tens of microseconds), while the two barriers a copy inside the region needs cost a
// whole scheduler time slice each when the other thread has been preempted (measured
// 1.4-1.6x the pass on a loaded 2-core machine).
template <bool kVals>
void compact_parallel(const float* x, int64_t begin, int64_t end, uint32_t key,
                      std::vector<int32_t>& idx, std::vector<float>* vals) {
  const int64_t n = std::max<int64_t>(0, end - begin);
  const int threads = n < (1 << 16) || omp_in_parallel() ? 1 : omp_get_max_threads();
  // The chunks keep their memory from call to call; one set per calling thread (a plain
  // reference, since inside the parallel region the name would be each worker's own).
  static thread_local std::vector<Chunk> caller_chunks;
  std::vector<Chunk>& chunks = caller_chunks;
  if (static_cast<int>(chunks.size()) < threads) chunks.resize(static_cast<size_t>(threads));
  int used = 1;
  if (threads == 1) {
    scan_chunk<kVals>(x, begin, end, key, chunks[0]);
  } else {
#pragma omp parallel num_threads(threads)
    {
      const int r = omp_get_thread_num(), t = omp_get_num_threads();
      if (r == 0) used = t;
      scan_chunk<kVals>(x, begin + n * r / t, begin + n * (r + 1) / t, key, chunks[r]);
    }
  }
  int64_t total = 0;
  for (int q = 0; q < used; ++q) total += chunks[q].size;
  idx.resize(static_cast<size_t>(total));
  if constexpr (kVals) vals->resize(static_cast<size_t>(total));
  int64_t o = 0;
  for (int q = 0; q < used; ++q) {
    const Chunk& c = chunks[q];
    if (c.size == 0) continue;
    std::memcpy(idx.data() + o, c.idx.get(), static_cast<size_t>(c.size) * 4);
    if constexpr (kVals)
      std::memcpy(vals->data() + o, c.val.get(), static_cast<size_t>(c.size) * 4);
    o += c.size;
  }
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
  // Pass 2: every position at or above the boundary bin (one skipping scan), then split
  // into the sure ones above the bin and the bin's candidates (both stay ascending).
  std::vector<int32_t> passing, candidates;
  compact_abs_ge(x, 0, n, static_cast<uint32_t>(boundary) << kShift, passing);
  const uint32_t above_key = static_cast<uint32_t>(boundary + 1) << kShift;
  std::vector<int32_t> sure_all;
  sure_all.reserve(static_cast<size_t>(above));
  for (int32_t i : passing) (abs_key(x[i]) >= above_key ? sure_all : candidates).push_back(i);
  // The `need` largest candidates, ties to the lower index.
  auto larger = [x](int32_t a, int32_t b) {
    const uint32_t ka = abs_key(x[a]), kb = abs_key(x[b]);
    return ka != kb ? ka > kb : a < b;
  };
  std::nth_element(candidates.begin(), candidates.begin() + (need - 1), candidates.end(), larger);
  const float threshold = key_value(abs_key(x[candidates[need - 1]]));
  candidates.resize(need);
  // The sure positions are already ascending, so only the boundary picks need sorting;
  // a linear merge joins the two instead of sorting all k (which cost as much as both
  // passes at k = 1% of 25M).
  std::sort(candidates.begin(), candidates.end());
  out.swap(sure_all);
  const auto mid = static_cast<std::ptrdiff_t>(out.size());
  out.insert(out.end(), candidates.begin(), candidates.end());
  std::inplace_merge(out.begin(), out.begin() + mid, out.end());
  return threshold;
}

void abs_threshold(const float* x, int64_t begin, int64_t end, float tau, bool strict,
                   std::vector<int32_t>& out) {
  // Strict compares against the next key up (|x| > tau  <=>  abs_key(x) >= key(tau) + 1).
  compact_abs_ge(x, begin, end, abs_key(tau) + (strict ? 1u : 0u), out);
}

void compact_abs_ge(const float* x, int64_t begin, int64_t end, uint32_t key,
                    std::vector<int32_t>& idx, std::vector<float>* vals) {
  if (vals)
    compact_parallel<true>(x, begin, end, key, idx, vals);
  else
    compact_parallel<false>(x, begin, end, key, idx, nullptr);
}

int64_t count_abs_ge(const float* x, int64_t begin, int64_t end, float tau) {
  const uint32_t key = abs_key(tau);
  int64_t c = 0;
#pragma omp parallel for reduction(+ : c) schedule(static) if (end - begin > 65536)
  for (int64_t i = begin; i < end; ++i) c += abs_key(x[i]) >= key;
  return c;
}

}  // namespace st::select

// --- Baseline helpers. ---
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
