// bulk::CudaOps against bulk::CpuOps for the threshold-family extras and the
// quantisation, transform and dense-algebra passes, with the bounds bulk_ops.h states:
// compactions, codes, packing, pair indices, magnitudes and per-range top-k bit for bit;
// moments and group scales within their summation-order bounds (and then codes exact
// wherever the scales agree); FFT and GEMM within float rounding. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "sparsify/dgc.h"
#include "sparsify/quantizers.h"
#include "sparsify/vgc.h"
#include "tests/sparsify/cuda_ops_fixture.h"

namespace st::test {
namespace {

// Count exact, sums within their order bounds; min exact where defined (tau >= 0).
void expect_moments_near(const sidco::Moments& c, const sidco::Moments& g, const char* what,
                         bool with_min = true) {
  EXPECT_EQ(g.count, c.count) << what;
  if (with_min) {
    EXPECT_EQ(g.min, c.min) << what;
  }
  EXPECT_NEAR(g.sum, c.sum, 1e-6 * (std::abs(c.sum) + 1)) << what;
  EXPECT_NEAR(g.sumsq, c.sumsq, 1e-6 * (std::abs(c.sumsq) + 1)) << what;
  EXPECT_NEAR(g.sumlog, c.sumlog, 1e-6 * (std::abs(c.sumlog) + 1)) << what;
}

TEST_F(CudaOpsTest, ThresholdExtrasMatchCpu) {
  const int64_t n = 100000;  // several moment blocks
  const std::vector<float> x = values(n, 41);
  Buffer cx, gx;
  put(x, Elem::F32, cx, gx);
  const Range r{123, n - 7};
  expect_moments_near(cpu_.exceed_moments(cx, r, -1.0f, 0), gpu_->exceed_moments(gx, r, -1.0f, 0),
                      "all", false);
  sidco::Moments c = cpu_.exceed_moments(cx, r, -1.0f, 3.0),
                 g = gpu_->exceed_moments(gx, r, -1.0f, 3.0);
  EXPECT_NEAR(g.sumlog, c.sumlog, 1e-6 * std::abs(c.sumlog));
  expect_moments_near(cpu_.exceed_moments(cx, r, 0.5f, 0), gpu_->exceed_moments(gx, r, 0.5f, 0),
                      "tau 0.5");
  // Two stages: the second compacts the first's values and maps back through positions.
  Buffer ci, cv, gi, gv, ci2, cv2, gi2, gv2;
  expect_moments_near(cpu_.exceed_compact(cx, r, 0.25f, nullptr, ci, cv),
                      gpu_->exceed_compact(gx, r, 0.25f, nullptr, gi, gv), "stage 1");
  EXPECT_EQ(ints_gpu(gi), ints_cpu(ci));
  EXPECT_EQ(floats_gpu(gv), floats_cpu(cv));
  expect_moments_near(cpu_.exceed_compact(cv, {0, cv.size()}, 1.0f, &ci, ci2, cv2),
                      gpu_->exceed_compact(gv, {0, gv.size()}, 1.0f, &gi, gi2, gv2), "stage 2");
  EXPECT_EQ(ints_gpu(gi2), ints_cpu(ci2));
  EXPECT_EQ(floats_gpu(gv2), floats_cpu(cv2));
}

TEST_F(CudaOpsTest, DgcAndVgcMatchCpu) {
  const int64_t n = 20000;
  const std::vector<float> x = values(n, 42), seen = values(n, 43), g = values(n, 44);
  Buffer cx, gx, cu, gu, cv, gv, cs, gs;
  put(x, Elem::F32, cx, gx);
  put(values(n, 45), Elem::F32, cu, gu);
  put(std::vector<float>(n, 0.0f), Elem::F32, cv, gv);
  put(seen, Elem::F32, cs, gs);
  dgc::momentum(cpu_, 0.9f, cx, cu, cv, cs);
  dgc::momentum(*gpu_, 0.9f, gx, gu, gv, gs);
  const std::vector<float> uc = floats_cpu(cu), ug = floats_gpu(gu);
  for (size_t i = 0; i < uc.size(); ++i)
    ASSERT_NEAR(ug[i], uc[i], 2e-7f * (std::abs(uc[i]) + 1)) << i;  // FMA contraction
  EXPECT_EQ(floats_gpu(gs), x);
  // VGC's test from the squared gradient, then its words both ways.
  Buffer cg, gg, cvar, gvar, co, go;
  put(g, Elem::F32, cg, gg);
  put(std::vector<float>(n, 0.01f), Elem::F32, cvar, gvar);
  const float mc = vgc::test(cpu_, cx, nullptr, &cg, 0.5f, 1.0f, 0.99f, 0.0f, cvar, co);
  const float mg = vgc::test(*gpu_, gx, nullptr, &gg, 0.5f, 1.0f, 0.99f, 0.0f, gvar, go);
  EXPECT_EQ(mg, mc);
  EXPECT_EQ(ints_gpu(go), ints_cpu(co));
  ASSERT_GT(co.size(), 0);
  Buffer cp, gp, cvals, gvals;
  vgc::pack(cpu_, cx, co, mc, 15, cp, cvals);
  vgc::pack(*gpu_, gx, go, mg, 15, gp, gvals);
  EXPECT_EQ(ints_gpu(gp), ints_cpu(cp));
  EXPECT_EQ(floats_gpu(gvals), floats_cpu(cvals));
  Buffer cidx, gidx, cw, gw;
  vgc::unpack(cpu_, cp, 0, cp.size(), 15, cidx, cw);
  vgc::unpack(*gpu_, gp, 0, gp.size(), 15, gidx, gw);
  EXPECT_EQ(ints_gpu(gidx), ints_cpu(cidx));
  EXPECT_EQ(floats_gpu(gw), floats_cpu(cw));
}

TEST_F(CudaOpsTest, QuantizersMatchCpuWhereTheScalesAgree) {
  const int64_t n = 70001;
  const std::vector<float> x = values(n, 46);
  Buffer cx, gx;
  put(x, Elem::F32, cx, gx);
  for (bulk::QuantKind kind :
       {bulk::QuantKind::Qsgd, bulk::QuantKind::TernGrad, bulk::QuantKind::Sign}) {
    bulk::QuantSpec q;
    q.kind = kind;
    q.chunk = 4096;
    q.levels = 7;
    q.seed = 9;
    q.stream = 3;
    SCOPED_TRACE(static_cast<int>(kind));
    Buffer cs, gs, cc, gc, cv, gv;
    cpu_.quantize(q, cx, cs, cc, cv);
    gpu_->quantize(q, gx, gs, gc, gv);
    const std::vector<float> sc = floats_cpu(cs), sg = floats_gpu(gs);
    ASSERT_EQ(sg.size(), sc.size());
    const std::vector<int32_t> codes_c = ints_cpu(cc), codes_g = ints_gpu(gc);
    int equal_groups = 0;
    for (size_t grp = 0; grp < sc.size(); ++grp) {
      ASSERT_NEAR(sg[grp], sc[grp], 1e-6f * std::abs(sc[grp])) << "group " << grp;
      if (sg[grp] != sc[grp]) continue;
      ++equal_groups;
      const part::Range r = q.group(static_cast<int64_t>(grp), n);
      for (int64_t i = r.begin; i < r.end; ++i) ASSERT_EQ(codes_g[i], codes_c[i]) << i;
    }
    EXPECT_GT(equal_groups, 0);
    // Decoding the CPU's words: bit for bit.
    Buffer cw, gw, cd, gd;
    const int64_t groups = q.groups(n);
    cpu_.resize(cw, Elem::U32, groups);
    cpu_.copy(cs, 0, cw, 0, groups);
    const std::vector<int32_t> words = ints_cpu(cw);
    gpu_->upload(words.data(), Elem::U32, groups, gw);
    Buffer gcodes;
    gpu_->upload(codes_c.data(), Elem::U32, n, gcodes);
    cpu_.dequantize(q, cc, cw, 0, cd);
    gpu_->dequantize(q, gcodes, gw, 0, gd);
    EXPECT_EQ(floats_gpu(gd), floats_cpu(cd));
  }
}

TEST_F(CudaOpsTest, BitPackingAndRangeFloatMatchCpu) {
  const int64_t n = 3001;
  for (int bits : {1, 2, 3, 7, 13, 32}) {
    std::vector<int32_t> codes(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      codes[static_cast<size_t>(i)] = static_cast<int32_t>((i * 2654435761u) >> (32 - bits));
    Buffer cc, gc, cw, gw, cu, gu;
    put(codes, Elem::U32, cc, gc);
    const int64_t nw = (n * bits + 31) / 32 + 2;
    put(std::vector<int32_t>(static_cast<size_t>(nw), 0), Elem::U32, cw, gw);
    cpu_.pack_bits(cc, bits, cw, 2);
    gpu_->pack_bits(gc, bits, gw, 2);
    EXPECT_EQ(ints_gpu(gw), ints_cpu(cw)) << bits;
    cpu_.unpack_bits(cw, 2, n, bits, cu);
    gpu_->unpack_bits(gw, 2, n, bits, gu);
    EXPECT_EQ(ints_gpu(gu), ints_cpu(cu)) << bits;
  }
  const std::vector<float> x = values(n, 47);
  Buffer cx, gx, cc, gc, cv, gv, cd, gd;
  put(x, Elem::F32, cx, gx);
  EXPECT_EQ(gpu_->abs_min_nonzero(gx, {5, n}), cpu_.abs_min_nonzero(cx, {5, n}));
  const quant::RangeFloat f = quant::range_float_format(cpu_.stats(cx, {0, n}).abs_max,
                                                        cpu_.abs_min_nonzero(cx, {0, n}), 8);
  cpu_.range_float_quantize(f, cx, cc, cv);
  gpu_->range_float_quantize(f, gx, gc, gv);
  EXPECT_EQ(ints_gpu(gc), ints_cpu(cc));
  EXPECT_EQ(floats_gpu(gv), floats_cpu(cv));
  cpu_.range_float_dequantize(f, cc, cd);
  gpu_->range_float_dequantize(f, gc, gd);
  EXPECT_EQ(floats_gpu(gd), floats_cpu(cd));
}

TEST_F(CudaOpsTest, TransformsAndRangesMatchCpu) {
  const int64_t n = 10000;
  const std::vector<float> x = values(n, 48);
  Buffer cx, gx;
  put(x, Elem::F32, cx, gx);
  // Three pieces of odd and even lengths, their spectra side by side.
  const std::vector<bulk::FftPiece> pieces = {{0, 4096, 0}, {4096, 999, 4098}, {5095, 4905, 5098}};
  const int64_t ncoef = 5098 + 2 * (4905 / 2 + 1);
  Buffer cc, gc, cb, gb;
  cpu_.resize(cc, Elem::F32, ncoef);
  gpu_->resize(gc, Elem::F32, ncoef);
  cpu_.rfft(cx, pieces, cc);
  gpu_->rfft(gx, pieces, gc);
  const std::vector<float> fc = floats_cpu(cc), fg = floats_gpu(gc);
  float scale = 0;
  for (float v : fc) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < fc.size(); ++i) ASSERT_NEAR(fg[i], fc[i], 1e-5f * scale) << i;
  put(std::vector<float>(n, 0.0f), Elem::F32, cb, gb);
  gpu_->irfft(gc, pieces, gb);
  const std::vector<float> back = floats_gpu(gb);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(back[i], x[i], 1e-4f) << i;
  // Magnitudes, per-range top-k (one range kept whole), pairs: bit for bit, on the CPU's
  // coefficients so the inputs are equal.
  Buffer gcoef, cm, gm, ck, gk, cp, gp;
  gpu_->upload(fc.data(), Elem::F32, ncoef, gcoef);
  cpu_.sq_magnitudes(cc, cm);
  gpu_->sq_magnitudes(gcoef, gm);
  EXPECT_EQ(floats_gpu(gm), floats_cpu(cm));
  const std::vector<bulk::TopkRange> ranges = {{0, 2049, 100}, {2049, 2549, 500}, {2549, 5000, 7}};
  EXPECT_EQ(gpu_->topk_abs_ranges(gm, ranges, gk), cpu_.topk_abs_ranges(cm, ranges, ck));
  EXPECT_EQ(ints_gpu(gk), ints_cpu(ck));
  cpu_.pair_indices(ck, cp);
  gpu_->pair_indices(gk, gp);
  EXPECT_EQ(ints_gpu(gp), ints_cpu(cp));
}

TEST_F(CudaOpsTest, GemmMatchesCpuInEveryLayout) {
  const int64_t m = 37, n = 23, k = 51;
  Buffer ca, ga, cb, gb;
  put(values(m * k + 5, 49), Elem::F32, ca, ga);
  put(values(k * n + 3, 50), Elem::F32, cb, gb);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Buffer cc, gc;
      const std::vector<float> c0 = values(m * n + 4, 51);
      put(c0, Elem::F32, cc, gc);
      cpu_.gemm(ta, tb, m, n, k, 0.5f, ca, 5, cb, 3, 2.0f, cc, 4);
      gpu_->gemm(ta, tb, m, n, k, 0.5f, ga, 5, gb, 3, 2.0f, gc, 4);
      const std::vector<float> rc = floats_cpu(cc), rg = floats_gpu(gc);
      for (size_t i = 0; i < rc.size(); ++i)
        ASSERT_NEAR(rg[i], rc[i], 1e-4f * (std::abs(rc[i]) + 1)) << ta << tb << " " << i;
    }
}

}  // namespace
}  // namespace st::test
