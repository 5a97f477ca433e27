// CpuOps: quantisation and bit packing (QSGD, TernGrad, EF-signSGD, FFT's range floats;
// op_list.h, ST_BULK_QUANT_OPS). The loops are the ones those methods ran on host memory
// before the interface, in the same order, so results keep their bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/rng.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cpu_common.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/quant_math.h"

namespace st::bulk {

using cpu_detail::bits_float;
using cpu_detail::kParallelMin;
// VGC's test and the TernGrad / EF-signSGD sums run over fixed blocks, joined in order.
constexpr int64_t kBlock = cpu_detail::kSumBlock;

namespace {

// The low `bits` of a code.
uint32_t code_mask(int bits) {
  return static_cast<uint32_t>((uint64_t{1} << bits) - 1);
}

}  // namespace

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

bool CpuOps::same_bits(const Buffer& a, const Buffer& b) {
  if (a.size() != b.size() || a.elem() != b.elem()) return false;
  return a.empty() || std::memcmp(memory(a), memory(b), 4 * static_cast<size_t>(a.size())) == 0;
}

}  // namespace st::bulk
