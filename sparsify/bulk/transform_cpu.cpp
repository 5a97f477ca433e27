// CpuOps: the transforms (FFT's per-piece real FFTs with FFTW and the coefficient passes
// around them; op_list.h, ST_BULK_TRANSFORM_OPS).
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>

#include "core/error.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cpu_common.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/kernels/select_cpu.h"

namespace st::bulk {

using cpu_detail::kParallelMin;

namespace {

// FFTW's planner is not thread-safe (only fftwf_execute* is): plan creation and
// destruction from any CpuOps take this lock.
std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

bool fftw_aligned(const void* p) {
  return fftwf_alignment_of(static_cast<float*>(const_cast<void*>(p))) == 0;
}

// Per-thread FFTW-aligned scratch of at least `floats` floats.
float* thread_scratch(int64_t floats) {
  struct Scratch {
    float* p = nullptr;
    int64_t size = 0;
    ~Scratch() { fftwf_free(p); }
  };
  thread_local Scratch b;
  if (b.size < floats) {
    fftwf_free(b.p);
    b.p = fftwf_alloc_real(static_cast<size_t>(floats));
    ST_CHECK(b.p, "bulk::CpuOps: out of memory for ", floats, " floats of FFT scratch");
    b.size = floats;
  }
  return b.p;
}

// The k largest |x| of x[0, count), ties to the lower index, ascending in `out`; returns
// the k-th largest. Short ranges (most tensors of a bucket) sort directly; long ones use
// the two-pass histogram kernel.
float keep_top(const float* x, int64_t count, int64_t k, std::vector<int32_t>& out) {
  if (count > 4096 && k < count) return select::topk_abs(x, count, k, out);
  out.resize(static_cast<size_t>(count));
  std::iota(out.begin(), out.end(), 0);
  auto larger = [x](int32_t a, int32_t b) {
    const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa != fb ? fa > fb : a < b;
  };
  std::nth_element(out.begin(), out.begin() + (k - 1), out.end(), larger);
  const float kth = std::fabs(x[out[static_cast<size_t>(k - 1)]]);
  out.resize(static_cast<size_t>(k));
  std::sort(out.begin(), out.end());
  return kth;
}

}  // namespace

// Out-of-place r2c and c2r plans per length, used through FFTW's new-array execute
// functions: an aligned pair (SIMD codelets) for arrays FFTW considers aligned, and an
// unaligned pair for pieces that start anywhere in the bucket.
struct CpuOps::FftCache {
  struct Plans {
    fftwf_plan r2c = nullptr, c2r = nullptr, r2c_u = nullptr, c2r_u = nullptr;
  };
  std::map<int64_t, Plans> by_len;

  const Plans& get(int64_t len) {
    auto it = by_len.find(len);
    if (it != by_len.end()) return it->second;
    std::lock_guard<std::mutex> lock(planner_mutex());
    const int n = static_cast<int>(len);
    float* r = fftwf_alloc_real(static_cast<size_t>(len));
    fftwf_complex* c = fftwf_alloc_complex(static_cast<size_t>(len / 2 + 1));
    Plans p;
    p.r2c = fftwf_plan_dft_r2c_1d(n, r, c, FFTW_ESTIMATE);
    p.c2r = fftwf_plan_dft_c2r_1d(n, c, r, FFTW_ESTIMATE);
    p.r2c_u = fftwf_plan_dft_r2c_1d(n, r, c, FFTW_ESTIMATE | FFTW_UNALIGNED);
    p.c2r_u = fftwf_plan_dft_c2r_1d(n, c, r, FFTW_ESTIMATE | FFTW_UNALIGNED);
    fftwf_free(r);
    fftwf_free(c);
    ST_CHECK(p.r2c && p.c2r && p.r2c_u && p.c2r_u, "bulk::CpuOps: FFTW could not plan length ",
             len);
    return by_len.emplace(len, p).first->second;
  }
  // Plans for every piece, made before the parallel loops (the planner is serial).
  void prepare(const std::vector<FftPiece>& pieces) {
    for (const FftPiece& p : pieces) get(p.len);
  }
  ~FftCache() {
    std::lock_guard<std::mutex> lock(planner_mutex());
    for (auto& [len, p] : by_len)
      for (fftwf_plan q : {p.r2c, p.c2r, p.r2c_u, p.c2r_u}) fftwf_destroy_plan(q);
  }
};

// --- FFT ---

namespace {

// fn(piece, its plans, m) for every piece, in parallel (m = 2 (len/2 + 1) floats of its
// half spectrum); the plans were made beforehand (FftCache::prepare).
template <class Cache, class Fn>
void for_each_piece(Cache& cache, const std::vector<FftPiece>& pieces, Fn fn) {
  const auto np = static_cast<int64_t>(pieces.size());
#pragma omp parallel for schedule(dynamic) if (np > 1)
  for (int64_t i = 0; i < np; ++i) {
    const FftPiece& p = pieces[static_cast<size_t>(i)];
    fn(p, cache.by_len.at(p.len), 2 * (p.len / 2 + 1));
  }
}

}  // namespace

void CpuOps::rfft(const Buffer& x, const std::vector<FftPiece>& pieces, Buffer& coef) {
  if (!fft_) fft_ = std::make_shared<FftCache>();
  fft_->prepare(pieces);
  const float* xp = f32(x);
  float* cp = f32(coef);
  check::fft_pieces("rfft", pieces, x.size(), coef.size());
  for_each_piece(*fft_, pieces, [&](const FftPiece& p, const auto& pl, int64_t m) {
    // Into aligned scratch, then copied: the coefficient layout leaves pieces unaligned.
    float* out = thread_scratch(m);
    float* in = const_cast<float*>(xp + p.begin);
    fftwf_execute_dft_r2c(fftw_aligned(in) ? pl.r2c : pl.r2c_u, in,
                          reinterpret_cast<fftwf_complex*>(out));
    std::copy(out, out + m, cp + p.coef);
  });
}

void CpuOps::irfft(const Buffer& coef, const std::vector<FftPiece>& pieces, Buffer& out) {
  if (!fft_) fft_ = std::make_shared<FftCache>();
  fft_->prepare(pieces);
  const float* cp = f32(coef);
  float* op = f32(out);
  check::fft_pieces("irfft", pieces, out.size(), coef.size());
  for_each_piece(*fft_, pieces, [&](const FftPiece& p, const auto& pl, int64_t m) {
    // c2r overwrites its input: transform an aligned copy, then scale by 1/N.
    float* in = thread_scratch(m);
    std::copy(cp + p.coef, cp + p.coef + m, in);
    float* dst = op + p.begin;
    fftwf_execute_dft_c2r(fftw_aligned(dst) ? pl.c2r : pl.c2r_u,
                          reinterpret_cast<fftwf_complex*>(in), dst);
    const float inv = 1.0f / static_cast<float>(p.len);
    for (int64_t e = 0; e < p.len; ++e) dst[e] *= inv;
  });
}

void CpuOps::sq_magnitudes(const Buffer& coef, Buffer& mag) {
  const int64_t nc = coef.size() / 2;
  resize(mag, Elem::F32, nc);
  const float* c = f32(coef);
  float* m = f32(mag);
#pragma omp parallel for schedule(static) if (nc > kParallelMin)
  for (int64_t j = 0; j < nc; ++j) m[j] = c[2 * j] * c[2 * j] + c[2 * j + 1] * c[2 * j + 1];
}

float CpuOps::topk_abs_ranges(const Buffer& x, const std::vector<TopkRange>& ranges, Buffer& out) {
  const float* xp = f32(x);
  resize(out, Elem::I32, check::topk_ranges(ranges, x.size()));
  int32_t* o = i32(out);
  float cut = std::numeric_limits<float>::infinity();
  for (const TopkRange& r : ranges) {
    cut = std::min(cut, keep_top(xp + r.begin, r.end - r.begin, r.k, scratch_));
    for (int32_t j : scratch_) *o++ = static_cast<int32_t>(r.begin + j);
  }
  return cut;
}

void CpuOps::pair_indices(const Buffer& idx, Buffer& out) {
  const int64_t m = idx.size();
  resize(out, Elem::I32, 2 * m);
  const int32_t* ip = i32(idx);
  int32_t* o = i32(out);
#pragma omp parallel for simd schedule(static) if (m > kParallelMin)
  for (int64_t j = 0; j < m; ++j) {
    o[2 * j] = 2 * ip[j];
    o[2 * j + 1] = 2 * ip[j] + 1;
  }
}

}  // namespace st::bulk
