// bulk::CpuOps: quantisation, transforms and dense algebra (DGC, VGC, QSGD, TernGrad,
// EF-signSGD, FFT, PowerSGD). The loops are the ones those methods ran on host memory
// before the interface, in the same order, so results keep their bits.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>

#include "core/error.h"
#include "core/kernels/blas.h"
#include "core/rng.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/kernels/select_cpu.h"

namespace st::bulk {

namespace {

constexpr int64_t kParallelMin = 65536;
// VGC's test and the TernGrad / EF-signSGD sums run over fixed blocks, joined in order.
constexpr int64_t kBlock = 1 << 16;

uint32_t float_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

float bits_float(uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// The low `bits` of a code.
uint32_t code_mask(int bits) {
  return static_cast<uint32_t>((uint64_t{1} << bits) - 1);
}

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

// --- DGC ---

void CpuOps::dgc_momentum(float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen) {
  const int64_t n = x.size();
  check::dgc_state(n, u, v, seen);
  const float* xp = f32(x);
  float* up = f32(u);
  float* acc = f32(v);
  float* sp = f32(seen);
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    up[i] = m * up[i] + (xp[i] - sp[i]);
    acc[i] += up[i];
    sp[i] = xp[i];
  }
}

// --- VGC ---

float CpuOps::vgc_test(const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch,
                       float alpha, float zeta, float tau, Buffer& v, Buffer& out) {
  const int64_t n = x.size();
  check::vgc_inputs(n, v, aux || grad);
  const float* xp = f32(x);
  const float* ap = aux ? f32(*aux) : nullptr;
  const float* gp = grad ? f32(*grad) : nullptr;
  float* vp = f32(v);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  range_hits_.resize(static_cast<size_t>(blocks));
  range_cut_.assign(static_cast<size_t>(blocks), 0.0f);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    std::vector<int32_t>& hits = range_hits_[static_cast<size_t>(b)];
    hits.clear();
    const int64_t end = std::min(n, (b + 1) * kBlock);
    float mx = 0.0f;
    for (int64_t i = b * kBlock; i < end; ++i) {
      const float add = ap ? ap[i] : gp[i] * gp[i] * inv_batch;
      const float vi = vp[i] + add;
      const float r = xp[i];
      const bool send = r * r > alpha * vi || (tau > 0 && std::abs(r) > tau);
      if (send) {
        hits.push_back(static_cast<int32_t>(i));
        mx = std::max(mx, std::abs(r));
        vp[i] = 0.0f;
      } else {
        vp[i] = vi * zeta;
      }
    }
    range_cut_[static_cast<size_t>(b)] = mx;
  }
  int64_t total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += static_cast<int64_t>(range_hits_[b].size());
  resize(out, Elem::I32, total);
  int32_t* o = i32(out);
  for (int64_t b = 0; b < blocks; ++b) {
    const std::vector<int32_t>& h = range_hits_[static_cast<size_t>(b)];
    std::copy(h.begin(), h.end(), o);
    o += h.size();
  }
  float scale = 0.0f;
  for (float c : range_cut_) scale = std::max(scale, c);
  return scale;
}

void CpuOps::vgc_pack(const Buffer& x, const Buffer& idx, float scale, int index_bits,
                      Buffer& packed, Buffer& values) {
  const int64_t m = idx.size();
  resize(packed, Elem::U32, m + 1);
  resize(values, Elem::F32, m);
  const float* xp = f32(x);
  const int32_t* ip = i32(idx);
  auto* w = static_cast<uint32_t*>(memory(packed));
  float* vp = f32(values);
  w[0] = float_bits(scale);
#pragma omp parallel for schedule(static) if (m > kParallelMin)
  for (int64_t j = 0; j < m; ++j) {
    const uint32_t word = quant::vgc_encode(ip[j], xp[ip[j]], scale, index_bits);
    w[j + 1] = word;
    vp[j] = quant::vgc_value(word, scale, index_bits);
  }
}

void CpuOps::vgc_unpack(const Buffer& words, int64_t offset, int64_t count, int index_bits,
                        Buffer& idx, Buffer& values) {
  check::vgc_words(words, offset, count);
  const auto* w = static_cast<const uint32_t*>(memory(words)) + offset;
  const float scale = bits_float(w[0]);
  const int64_t m = count - 1;
  resize(idx, Elem::I32, m);
  resize(values, Elem::F32, m);
  int32_t* ip = i32(idx);
  float* vp = f32(values);
#pragma omp parallel for schedule(static) if (m > kParallelMin)
  for (int64_t j = 0; j < m; ++j) {
    ip[j] = quant::vgc_index(w[j + 1], index_bits);
    vp[j] = quant::vgc_value(w[j + 1], scale, index_bits);
  }
}

// --- Quantisers ---

namespace {

// Sums of a TernGrad or EF-signSGD group block: x and x^2 (TernGrad) or |x| (Sign), max |x|.
struct BlockSums {
  double a = 0, b = 0;
  float mx = 0;
};

}  // namespace

// TernGrad and EF-signSGD: each group's sums over fixed blocks of kBlock elements (in
// index order inside a block), the blocks added in order, so the bits do not depend on
// the thread count (a group of one block is the plain serial sum); then the group's codes
// and values. One parallel region for all groups.
void CpuOps::scaled_groups(const QuantSpec& q, const float* xp, int64_t n, float* sc, uint32_t* cp,
                           float* vp) {
  const int64_t groups = q.groups(n);
  std::vector<int64_t> first(static_cast<size_t>(groups) + 1, 0);  // each group's first block
  for (int64_t g = 0; g < groups; ++g)
    first[g + 1] = first[g] + std::max<int64_t>(1, (q.group(g, n).size() + kBlock - 1) / kBlock);
  std::vector<BlockSums> part(static_cast<size_t>(first[groups]));
  const bool tern = q.kind == QuantKind::TernGrad;
  const uint64_t seed = q.seed, stream = q.stream;  // locals: no aliasing with the stores
  const int64_t chunk = q.chunk;
#pragma omp parallel if (n > kParallelMin)
  {
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < first[groups]; ++blk) {
      const int64_t g = std::upper_bound(first.begin(), first.end(), blk) - first.begin() - 1;
      const part::Range r = q.group(g, n);
      const int64_t b = r.begin + (blk - first[g]) * kBlock, e = std::min(r.end, b + kBlock);
      BlockSums s;
      if (tern) {
        for (int64_t i = b; i < e; ++i) {
          s.mx = std::max(s.mx, std::abs(xp[i]));
          s.a += xp[i];
          s.b += static_cast<double>(xp[i]) * xp[i];
        }
      } else {
        for (int64_t i = b; i < e; ++i) s.a += std::abs(xp[i]);
      }
      part[static_cast<size_t>(blk)] = s;
    }
#pragma omp single
    for (int64_t g = 0; g < groups; ++g) {
      BlockSums t;
      for (int64_t blk = first[g]; blk < first[g + 1]; ++blk) {
        t.a += part[blk].a;
        t.b += part[blk].b;
        t.mx = std::max(t.mx, part[blk].mx);
      }
      const int64_t len = q.group(g, n).size();
      sc[g] = tern ? quant::terngrad_scale(t.mx, t.a, t.b, len, q.clip)
                   : (len > 0 ? static_cast<float>(t.a / static_cast<double>(len)) : 0.0f);
    }
    auto code_value = [&](int64_t i, float scale) {
      if (tern) {
        const int32_t l = quant::terngrad_level(xp[i], scale, philox_uniform(seed, stream, i));
        cp[i] = quant::level_code(l, 2);
        vp[i] = quant::terngrad_value(l, scale);
      } else {
        const bool neg = xp[i] < 0;
        cp[i] = neg ? 1u : 0u;
        vp[i] = neg ? -scale : scale;
      }
    };
    if (chunk > 0) {  // many small groups: one loop, the group from the position
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) code_value(i, sc[i / chunk]);
    } else {
      for (int64_t g = 0; g < groups; ++g) {  // a few groups (tensors): each one shared out
        const part::Range r = q.group(g, n);
#pragma omp for schedule(static) nowait
        for (int64_t i = r.begin; i < r.end; ++i) code_value(i, sc[g]);
      }
    }
  }
}

void CpuOps::quantize(const QuantSpec& q, const Buffer& x, Buffer& scales, Buffer& codes,
                      Buffer& values) {
  const int64_t n = x.size(), groups = q.groups(n);
  const int bits = q.bits();
  resize(scales, Elem::F32, groups);
  resize(codes, Elem::U32, n);
  resize(values, Elem::F32, n);
  const float* xp = f32(x);
  float* sc = f32(scales);
  auto* cp = static_cast<uint32_t*>(memory(codes));
  float* vp = f32(values);
  if (q.kind == QuantKind::Qsgd) {
    // Locals, so the code stores (uint32) cannot alias the spec's fields in the loop.
    const int32_t levels = q.levels;
    const uint64_t seed = q.seed, stream = q.stream;
    // One chunk per iteration: its squared norm in index order, then its levels.
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (int64_t c = 0; c < groups; ++c) {
      const part::Range r = q.group(c, n);
      double sq = 0;
      for (int64_t i = r.begin; i < r.end; ++i) sq += static_cast<double>(xp[i]) * xp[i];
      const float norm = static_cast<float>(std::sqrt(sq));
      sc[c] = norm;
      for (int64_t i = r.begin; i < r.end; ++i) {
        const int32_t l = quant::qsgd_level(xp[i], norm, levels, philox_uniform(seed, stream, i));
        cp[i] = quant::level_code(l, bits);
        vp[i] = quant::qsgd_value(l, norm, levels);
      }
    }
    return;
  }
  scaled_groups(q, xp, n, sc, cp, vp);
}

void CpuOps::dequantize(const QuantSpec& q, const Buffer& codes, const Buffer& words,
                        int64_t scales_at, Buffer& values) {
  const int64_t n = codes.size(), groups = q.groups(n);
  check::scale_words(groups, scales_at, words);
  const int bits = q.bits();
  resize(values, Elem::F32, n);
  const auto* cp = static_cast<const uint32_t*>(memory(codes));
  const auto* sw = static_cast<const uint32_t*>(memory(words)) + scales_at;
  float* vp = f32(values);
  const int32_t levels = q.levels;
  const QuantKind kind = q.kind;
  auto value = [=](uint32_t code, float scale) {
    switch (kind) {
      case QuantKind::Qsgd:
        return quant::qsgd_value(quant::code_level(code, bits), scale, levels);
      case QuantKind::TernGrad:
        return quant::terngrad_value(quant::code_level(code, 2), scale);
      case QuantKind::Sign:
        break;
    }
    return code & 1u ? -scale : scale;
  };
  if (q.chunk > 0) {  // many small groups: one loop, the group from the position
    const int64_t chunk = q.chunk;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) vp[i] = value(cp[i], bits_float(sw[i / chunk]));
    return;
  }
#pragma omp parallel if (n > kParallelMin)
  for (int64_t g = 0; g < groups; ++g) {  // a few groups (tensors): each one shared out
    const part::Range r = q.group(g, n);
    const float scale = bits_float(sw[g]);
#pragma omp for schedule(static) nowait
    for (int64_t i = r.begin; i < r.end; ++i) vp[i] = value(cp[i], scale);
  }
}

// 32 codes of `bits` bits fill exactly `bits` words, so groups of 32 codes pack (and
// unpack) independently: the parallel loops give the serial stream's words.
void CpuOps::pack_bits(const Buffer& codes, int bits, Buffer& words, int64_t at) {
  const int64_t n = codes.size();
  check::packed_words("pack_bits", bits, n, at, words);
  const auto* cp = static_cast<const uint32_t*>(memory(codes));
  auto* wp = static_cast<uint32_t*>(memory(words)) + at;
  const uint32_t mask = code_mask(bits);
  const int64_t groups = (n + 31) / 32;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t end = std::min(n, (g + 1) * 32);
    uint32_t* dst = wp + g * bits;
    uint64_t acc = 0;
    int fill = 0;
    for (int64_t j = g * 32; j < end; ++j) {
      acc |= static_cast<uint64_t>(cp[j] & mask) << fill;
      fill += bits;
      if (fill >= 32) {
        *dst++ = static_cast<uint32_t>(acc);
        acc >>= 32;
        fill -= 32;
      }
    }
    if (fill > 0) *dst = static_cast<uint32_t>(acc);
  }
}

void CpuOps::unpack_bits(const Buffer& words, int64_t at, int64_t count, int bits, Buffer& codes) {
  check::packed_words("unpack_bits", bits, count, at, words);
  resize(codes, Elem::U32, count);
  const auto* wp = static_cast<const uint32_t*>(memory(words)) + at;
  auto* cp = static_cast<uint32_t*>(memory(codes));
  const uint32_t mask = code_mask(bits);
  const int64_t groups = (count + 31) / 32;
#pragma omp parallel for schedule(static) if (count > kParallelMin)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t end = std::min(count, (g + 1) * 32);
    const uint32_t* src = wp + g * bits;
    uint64_t acc = 0;
    int fill = 0;
    for (int64_t j = g * 32; j < end; ++j) {
      if (fill < bits) {
        acc |= static_cast<uint64_t>(*src++) << fill;
        fill += 32;
      }
      cp[j] = static_cast<uint32_t>(acc) & mask;
      acc >>= bits;
      fill -= bits;
    }
  }
}

void CpuOps::range_float_quantize(const quant::RangeFloat& f, const Buffer& x, Buffer& codes,
                                  Buffer& values) {
  const int64_t n = x.size();
  resize(codes, Elem::U32, n);
  resize(values, Elem::F32, n);
  const float* xp = f32(x);
  auto* cp = static_cast<uint32_t*>(memory(codes));
  float* vp = f32(values);
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    cp[i] = quant::range_float_encode(f, xp[i]);
    vp[i] = quant::range_float_decode(f, cp[i]);
  }
}

void CpuOps::range_float_dequantize(const quant::RangeFloat& f, const Buffer& codes,
                                    Buffer& values) {
  const int64_t n = codes.size();
  resize(values, Elem::F32, n);
  const auto* cp = static_cast<const uint32_t*>(memory(codes));
  float* vp = f32(values);
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) vp[i] = quant::range_float_decode(f, cp[i]);
}

float CpuOps::abs_min_nonzero(const Buffer& x, part::Range r) {
  check::range("abs_min_nonzero", x.size(), r);
  const float* xp = f32(x);
  float mn = 0;
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float a = std::abs(xp[i]);
    if (a > 0 && (mn == 0 || a < mn)) mn = a;
  }
  return mn;
}

// --- FFT ---

void CpuOps::rfft(const Buffer& x, const std::vector<FftPiece>& pieces, Buffer& coef) {
  if (!fft_) fft_ = std::make_shared<FftCache>();
  fft_->prepare(pieces);
  const float* xp = f32(x);
  float* cp = f32(coef);
  check::fft_pieces("rfft", pieces, x.size(), coef.size());
  const int64_t np = static_cast<int64_t>(pieces.size());
  FftCache& cache = *fft_;
#pragma omp parallel for schedule(dynamic) if (np > 1)
  for (int64_t i = 0; i < np; ++i) {
    const FftPiece& p = pieces[static_cast<size_t>(i)];
    // Into aligned scratch, then copied: the coefficient layout leaves pieces unaligned.
    const FftCache::Plans& pl = cache.by_len.at(p.len);
    const int64_t m = 2 * (p.len / 2 + 1);
    float* out = thread_scratch(m);
    float* in = const_cast<float*>(xp + p.begin);
    fftwf_execute_dft_r2c(fftw_aligned(in) ? pl.r2c : pl.r2c_u, in,
                          reinterpret_cast<fftwf_complex*>(out));
    std::copy(out, out + m, cp + p.coef);
  }
}

void CpuOps::irfft(const Buffer& coef, const std::vector<FftPiece>& pieces, Buffer& out) {
  if (!fft_) fft_ = std::make_shared<FftCache>();
  fft_->prepare(pieces);
  const float* cp = f32(coef);
  float* op = f32(out);
  check::fft_pieces("irfft", pieces, out.size(), coef.size());
  const int64_t np = static_cast<int64_t>(pieces.size());
  FftCache& cache = *fft_;
#pragma omp parallel for schedule(dynamic) if (np > 1)
  for (int64_t i = 0; i < np; ++i) {
    const FftPiece& p = pieces[static_cast<size_t>(i)];
    // c2r overwrites its input: transform an aligned copy, then scale by 1/N.
    const FftCache::Plans& pl = cache.by_len.at(p.len);
    const int64_t m = 2 * (p.len / 2 + 1);
    float* in = thread_scratch(m);
    std::copy(cp + p.coef, cp + p.coef + m, in);
    float* dst = op + p.begin;
    fftwf_execute_dft_c2r(fftw_aligned(dst) ? pl.c2r : pl.c2r_u,
                          reinterpret_cast<fftwf_complex*>(in), dst);
    const float inv = 1.0f / static_cast<float>(p.len);
    for (int64_t e = 0; e < p.len; ++e) dst[e] *= inv;
  }
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

// --- Dense algebra ---

void CpuOps::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const Buffer& A, int64_t a_off, const Buffer& B, int64_t b_off, float beta,
                  Buffer& C, int64_t c_off) {
  check::gemm_shapes(m, n, k, A, a_off, B, b_off, C, c_off);
  if (m == 0 || n == 0) return;
  cpu::gemm(trans_a, trans_b, m, n, k, alpha, f32(A) + a_off, f32(B) + b_off, beta, f32(C) + c_off);
}

}  // namespace st::bulk
