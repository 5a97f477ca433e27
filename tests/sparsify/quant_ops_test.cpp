// The quantisation, transform and dense-algebra passes of bulk::Ops on the CPU
// implementation, against references written out here (the loops the methods ran on host
// memory before the interface, bit by bit streams, a naive DFT and GEMM) and known values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/dgc.h"
#include "sparsify/quantizers.h"
#include "sparsify/vgc.h"

namespace st::test {
namespace {

using bulk::Buffer;
using bulk::Elem;

std::vector<float> gaussian(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.normal() * std::abs(rng.normal());
  return v;
}

template <class T>
Buffer up(bulk::Ops& ops, const std::vector<T>& v, Elem e) {
  Buffer b;
  ops.upload(v.data(), e, static_cast<int64_t>(v.size()), b);
  return b;
}

template <class T>
std::vector<T> down(bulk::Ops& ops, const Buffer& b) {
  std::vector<T> v(static_cast<size_t>(b.size()));
  ops.download(b, 0, b.size(), v.data());
  return v;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(QuantOps, PackBitsIsTheLsbFirstStreamForEveryWidth) {
  bulk::CpuOps ops;
  Rng rng(1);
  for (int bits = 1; bits <= 32; ++bits)
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{1000},
                      int64_t{70001}}) {
      std::vector<uint32_t> codes(static_cast<size_t>(n));
      for (auto& c : codes)  // high bits beyond `bits` must be ignored
        c = (rng.below(1u << 16) << 16) ^ rng.below(1u << 16) ^ (rng.below(2) << 31);
      const int64_t nw = (n * bits + 31) / 32;
      // Reference: bit b of code j is bit j * bits + b of the stream.
      std::vector<uint32_t> want(static_cast<size_t>(nw), 0u);
      for (int64_t j = 0; j < n; ++j)
        for (int b = 0; b < bits; ++b)
          if ((codes[j] >> b) & 1u) {
            const int64_t at = j * bits + b;
            want[at / 32] |= 1u << (at % 32);
          }
      Buffer c = up(ops, codes, Elem::U32), w;
      ops.resize(w, Elem::U32, nw + 3);
      ops.fill(w, {0, nw + 3}, 0.0f);
      ops.pack_bits(c, bits, w, 3);
      const std::vector<uint32_t> got = down<uint32_t>(ops, w);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + 3))
          << bits << " bits, " << n << " codes";
      Buffer back;
      ops.unpack_bits(w, 3, n, bits, back);
      const std::vector<uint32_t> b = down<uint32_t>(ops, back);
      const uint32_t mask = static_cast<uint32_t>((uint64_t{1} << bits) - 1);
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(b[j], codes[j] & mask) << bits << " bits, code " << j;
    }
  Buffer w, c;
  ops.resize(w, Elem::U32, 2);
  EXPECT_THROW(ops.unpack_bits(w, 0, 3, 24, c), Error) << "72 bits do not fit in 2 words";
}

// The QSGD / TernGrad / EF-signSGD loops the sparsifiers ran before the interface.
void reference_quantize(const bulk::QuantSpec& q, const std::vector<float>& x,
                        std::vector<float>& scales, std::vector<uint32_t>& codes,
                        std::vector<float>& values) {
  const int64_t n = static_cast<int64_t>(x.size()), G = q.groups(n);
  scales.assign(G, 0.0f);
  codes.assign(n, 0u);
  values.assign(n, 0.0f);
  for (int64_t g = 0; g < G; ++g) {
    const part::Range r = q.group(g, n);
    // QSGD: one sum in index order; TernGrad and Sign: blocks of 65536, added in order.
    const int64_t block = q.kind == bulk::QuantKind::Qsgd ? r.size() + 1 : 65536;
    double s1 = 0, s2 = 0, sa = 0;
    float mx = 0;
    for (int64_t b = r.begin; b < r.end; b += block) {
      double b1 = 0, b2 = 0, ba = 0;
      for (int64_t i = b; i < std::min(r.end, b + block); ++i) {
        b1 += x[i];
        b2 += static_cast<double>(x[i]) * x[i];
        ba += std::abs(x[i]);
        mx = std::max(mx, std::abs(x[i]));
      }
      s1 += b1;
      s2 += b2;
      sa += ba;
    }
    float s = 0;
    if (q.kind == bulk::QuantKind::Qsgd) s = static_cast<float>(std::sqrt(s2));
    if (q.kind == bulk::QuantKind::TernGrad)
      s = quant::terngrad_scale(mx, s1, s2, r.size(), q.clip);
    if (q.kind == bulk::QuantKind::Sign)
      s = r.size() > 0 ? static_cast<float>(sa / static_cast<double>(r.size())) : 0.0f;
    scales[g] = s;
    for (int64_t i = r.begin; i < r.end; ++i) {
      const float u = philox_uniform(q.seed, q.stream, static_cast<uint64_t>(i));
      if (q.kind == bulk::QuantKind::Qsgd) {
        const int32_t l = quant::qsgd_level(x[i], s, q.levels, u);
        codes[i] = quant::level_code(l, q.bits());
        values[i] = quant::qsgd_value(l, s, q.levels);
      } else if (q.kind == bulk::QuantKind::TernGrad) {
        const int32_t l = quant::terngrad_level(x[i], s, u);
        codes[i] = quant::level_code(l, 2);
        values[i] = quant::terngrad_value(l, s);
      } else {
        codes[i] = x[i] < 0 ? 1u : 0u;
        values[i] = x[i] < 0 ? -s : s;
      }
    }
  }
}

TEST(QuantOps, QuantizeMatchesTheSerialLoopsAndDequantizeInvertsIt) {
  bulk::CpuOps ops;
  const std::vector<float> x = gaussian(150001, 2);  // groups of more than one block too
  std::vector<bulk::QuantSpec> specs(5);
  specs[0].kind = bulk::QuantKind::Qsgd, specs[0].chunk = 512, specs[0].levels = 15;
  specs[1].kind = bulk::QuantKind::Qsgd, specs[1].levels = 255;  // one chunk
  specs[2].kind = bulk::QuantKind::TernGrad, specs[2].chunk = 1000, specs[2].clip = 2.5f;
  specs[3].kind = bulk::QuantKind::TernGrad;
  specs[4].kind = bulk::QuantKind::Sign, specs[4].starts = {0, 7, 40000, 40001};
  for (size_t s = 0; s < specs.size(); ++s) {
    bulk::QuantSpec& q = specs[s];
    q.seed = 3;
    q.stream = quant::rounding_stream(1, 2, static_cast<int64_t>(s));
    std::vector<float> rs, rv;
    std::vector<uint32_t> rc;
    reference_quantize(q, x, rs, rc, rv);
    Buffer xb = up(ops, x, Elem::F32), scales, codes, values;
    ops.quantize(q, xb, scales, codes, values);
    EXPECT_EQ(down<float>(ops, scales), rs) << "spec " << s;
    EXPECT_EQ(down<uint32_t>(ops, codes), rc) << "spec " << s;
    const std::vector<float> got = down<float>(ops, values);
    ASSERT_EQ(got.size(), rv.size());
    for (size_t i = 0; i < rv.size(); ++i)
      ASSERT_EQ(bits_of(got[i]), bits_of(rv[i])) << s << " " << i;
    // The wire form: scales as words, then dequantised from codes alone.
    Buffer words, deq;
    ops.resize(words, Elem::U32, scales.size() + 1);
    ops.copy(scales, 0, words, 1, scales.size());
    ops.dequantize(q, codes, words, 1, deq);
    EXPECT_TRUE(ops.same_bits(deq, values)) << "spec " << s;
  }
}

TEST(QuantOps, VgcTestMatchesTheSerialRuleAndItsWordsRoundTrip) {
  bulk::CpuOps ops;
  const int64_t n = 150001;  // three blocks of the test
  const std::vector<float> x = gaussian(n, 4), g = gaussian(n, 5);
  std::vector<float> aux(static_cast<size_t>(n)), v0(static_cast<size_t>(n));
  Rng rng(6);
  for (int64_t i = 0; i < n; ++i) {
    aux[i] = 0.5f * rng.uniform();
    v0[i] = i % 3 == 0 ? 0.0f : rng.uniform();
  }
  const float inv_b = 0.25f, alpha = 1.5f, zeta = 0.999f;
  for (float tau : {0.0f, 1.0f})
    for (bool with_aux : {true, false}) {
      std::vector<float> v = v0;
      std::vector<int32_t> want;
      float mx = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float add = with_aux ? aux[i] : g[i] * g[i] * inv_b;
        const float vi = v[i] + add;
        if (x[i] * x[i] > alpha * vi || (tau > 0 && std::abs(x[i]) > tau)) {
          want.push_back(static_cast<int32_t>(i));
          mx = std::max(mx, std::abs(x[i]));
          v[i] = 0.0f;
        } else {
          v[i] = vi * zeta;
        }
      }
      Buffer xb = up(ops, x, Elem::F32), ab = up(ops, aux, Elem::F32), gb = up(ops, g, Elem::F32);
      Buffer vb = up(ops, v0, Elem::F32), out;
      const float scale = vgc::test(ops, xb, with_aux ? &ab : nullptr, with_aux ? nullptr : &gb,
                                    inv_b, alpha, zeta, tau, vb, out);
      EXPECT_EQ(scale, mx);
      EXPECT_EQ(down<int32_t>(ops, out), want);
      const std::vector<float> vg = down<float>(ops, vb);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(vg[i], v[i], 1e-6f * (1 + v[i])) << i;
      // Words: the scale, then (index, sign, exponent) entries that decode to the values.
      const int ib = 18;
      Buffer packed, values, idx2, values2;
      vgc::pack(ops, xb, out, scale, ib, packed, values);
      const std::vector<uint32_t> w = down<uint32_t>(ops, packed);
      ASSERT_EQ(w.size(), want.size() + 1);
      EXPECT_EQ(w[0], bits_of(scale));
      for (size_t j = 0; j < want.size(); j += 97)
        ASSERT_EQ(w[j + 1], quant::vgc_encode(want[j], x[want[j]], scale, ib));
      Buffer all;
      ops.resize(all, Elem::U32, packed.size() + 5);
      ops.copy(packed, 0, all, 5, packed.size());
      vgc::unpack(ops, all, 5, packed.size(), ib, idx2, values2);
      EXPECT_TRUE(ops.same_bits(idx2, out));
      EXPECT_TRUE(ops.same_bits(values2, values));
    }
}

TEST(QuantOps, RangeFloatAndSmallPassesOnKnownValues) {
  bulk::CpuOps ops;
  const std::vector<float> x = {0.0f, -3.0f, 0.25f, 0.0f, 1e-3f, -40.0f};
  Buffer xb = up(ops, x, Elem::F32);
  EXPECT_EQ(ops.abs_min_nonzero(xb, {0, 6}), 1e-3f);
  EXPECT_EQ(ops.abs_min_nonzero(xb, {0, 1}), 0.0f) << "only zeros";
  EXPECT_EQ(ops.abs_min_nonzero(xb, {1, 3}), 0.25f);
  const quant::RangeFloat f = quant::range_float_format(40.0f, 1e-3f, 12);
  Buffer codes, values, again;
  ops.range_float_quantize(f, xb, codes, values);
  const std::vector<uint32_t> c = down<uint32_t>(ops, codes);
  const std::vector<float> v = down<float>(ops, values);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(c[i], quant::range_float_encode(f, x[i]));
    EXPECT_EQ(v[i], quant::range_float_decode(f, c[i]));
  }
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], -3.0f) << "3 = 1.5 x 2^1 is exact with mantissa bits to spare";
  ops.range_float_dequantize(f, codes, again);
  EXPECT_TRUE(ops.same_bits(again, values));
  // (3, 4i) and (0, -1i): squared magnitudes 25 and 1; coefficient pairs.
  Buffer coef = up(ops, std::vector<float>{3, 4, 0, -1}, Elem::F32), mag, pairs;
  ops.sq_magnitudes(coef, mag);
  EXPECT_EQ(down<float>(ops, mag), (std::vector<float>{25, 1}));
  ops.pair_indices(up(ops, std::vector<int32_t>{0, 5}, Elem::I32), pairs);
  EXPECT_EQ(down<int32_t>(ops, pairs), (std::vector<int32_t>{0, 1, 10, 11}));
}

TEST(QuantOps, TopkPerRangeTakesEachRangesLargestWithTiesToTheLowerIndex) {
  bulk::CpuOps ops;
  std::vector<float> x = gaussian(20000, 7);
  for (int64_t i = 100; i < 200; i += 3) x[i] = -9.0f;  // ties in a short range
  const std::vector<bulk::TopkRange> ranges = {
      {0, 10, 1}, {50, 300, 20}, {300, 301, 1}, {1000, 20000, 700}};
  Buffer xb = up(ops, x, Elem::F32), out;
  const float cut = ops.topk_abs_ranges(xb, ranges, out);
  std::vector<int32_t> want;
  float want_cut = INFINITY;
  for (const auto& r : ranges) {
    std::vector<int32_t> p(static_cast<size_t>(r.end - r.begin));
    std::iota(p.begin(), p.end(), static_cast<int32_t>(r.begin));
    std::stable_sort(p.begin(), p.end(),
                     [&](int32_t a, int32_t b) { return std::abs(x[a]) > std::abs(x[b]); });
    p.resize(static_cast<size_t>(r.k));
    want_cut = std::min(want_cut, std::abs(x[p.back()]));
    std::sort(p.begin(), p.end());
    want.insert(want.end(), p.begin(), p.end());
  }
  EXPECT_EQ(down<int32_t>(ops, out), want);
  EXPECT_EQ(cut, want_cut);
  EXPECT_THROW(ops.topk_abs_ranges(xb, {{0, 10, 11}}, out), Error) << "k above the length";
}

TEST(QuantOps, GemmMatchesANaiveProductForEveryTransposition) {
  bulk::CpuOps ops;
  const int64_t m = 7, n = 5, k = 9;
  const std::vector<float> a = gaussian(3 + m * k, 8), b = gaussian(2 + k * n, 9);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Buffer A = up(ops, a, Elem::F32), B = up(ops, b, Elem::F32), C;
      ops.resize(C, Elem::F32, 4 + m * n);
      ops.fill(C, {0, 4 + m * n}, 1.0f);
      ops.gemm(ta, tb, m, n, k, 2.0f, A, 3, B, 2, 0.5f, C, 4);
      const std::vector<float> c = down<float>(ops, C);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t l = 0; l < k; ++l)
            s += static_cast<double>(a[3 + (ta ? l * m + i : i * k + l)]) *
                 b[2 + (tb ? j * k + l : l * n + j)];
          ASSERT_NEAR(c[4 + i * n + j], 2 * s + 0.5, 1e-4) << ta << tb << " " << i << "," << j;
        }
      EXPECT_EQ(c[0], 1.0f) << "outside the product";
    }
}

TEST(QuantOps, RealFftPerPieceMatchesANaiveDftAndInvertsIt) {
  bulk::CpuOps ops;
  const std::vector<float> x = gaussian(60, 10);
  // Pieces of odd, even and prime lengths, with a gap in the coefficient buffer.
  const std::vector<bulk::FftPiece> pieces = {{0, 7, 0}, {7, 16, 10}, {23, 37, 30}};
  Buffer xb = up(ops, x, Elem::F32), coef, back;
  ops.resize(coef, Elem::F32, 30 + 2 * (37 / 2 + 1));
  ops.rfft(xb, pieces, coef);
  const std::vector<float> c = down<float>(ops, coef);
  for (const auto& p : pieces)
    for (int64_t j = 0; j <= p.len / 2; ++j) {
      std::complex<double> s = 0;
      for (int64_t t = 0; t < p.len; ++t)
        s += static_cast<double>(x[p.begin + t]) *
             std::polar(1.0, -2 * M_PI * static_cast<double>(j * t) / static_cast<double>(p.len));
      ASSERT_NEAR(c[p.coef + 2 * j], s.real(), 1e-4) << p.len << " " << j;
      ASSERT_NEAR(c[p.coef + 2 * j + 1], s.imag(), 1e-4) << p.len << " " << j;
    }
  ops.resize(back, Elem::F32, 60);
  ops.fill(back, {0, 60}, 7.0f);
  ops.irfft(coef, pieces, back);
  const std::vector<float> y = down<float>(ops, back);
  for (int64_t i = 0; i < 60; ++i) ASSERT_NEAR(y[i], x[i], 1e-5) << i;
  EXPECT_EQ(down<float>(ops, coef), c) << "the inverse leaves the coefficients alone";
}

TEST(QuantOps, DgcMomentumRunsEquationsSixAndSeven) {
  bulk::CpuOps ops;
  const int64_t n = 70000;
  const std::vector<float> x = gaussian(n, 11), u0 = gaussian(n, 12), v0 = gaussian(n, 13),
                           s0 = gaussian(n, 14);
  Buffer xb = up(ops, x, Elem::F32), u = up(ops, u0, Elem::F32), v = up(ops, v0, Elem::F32),
         seen = up(ops, s0, Elem::F32);
  dgc::momentum(ops, 0.9f, xb, u, v, seen);
  const std::vector<float> gu = down<float>(ops, u), gv = down<float>(ops, v);
  EXPECT_TRUE(ops.same_bits(seen, xb));
  for (int64_t i = 0; i < n; ++i) {
    const float ui = 0.9f * u0[i] + (x[i] - s0[i]);
    ASSERT_NEAR(gu[i], ui, 1e-6f * (1 + std::abs(ui))) << i;
    ASSERT_NEAR(gv[i], v0[i] + ui, 1e-6f * (1 + std::abs(v0[i] + ui))) << i;
  }
}

}  // namespace
}  // namespace st::test
