// Quantisers: the range-based float (FFT paper), QSGD and TernGrad, and their packed wire
// formats; each round trip within its stated bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "sparsify/quantizers.h"
#include "sparsify/registry.h"
#include "tests/sparsify/host_forms.h"

namespace st::test {
namespace {

using quant::RangeFloat;

// Log-uniform magnitudes over [2^lo, 2^hi), random signs, plus a few exact zeros.
std::vector<float> log_uniform(int64_t n, float lo, float hi, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    const float a = std::exp2(lo + (hi - lo) * rng.uniform());
    x = rng.uniform() < 0.5f ? -a : a;
  }
  v[0] = 0.0f;
  return v;
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}
float min_abs_nonzero(const std::vector<float>& v) {
  float m = 0;
  for (float x : v)
    if (x != 0 && (m == 0 || std::abs(x) < m)) m = std::abs(x);
  return m;
}

// The stated bound of range_float_encode (quantizers.h).
void expect_range_float_bound(const std::vector<float>& v, int width) {
  const RangeFloat f = quant::range_float_format(max_abs(v), min_abs_nonzero(v), width);
  const float max_code_value = quant::range_float_decode(f, (1u << (width - 1)) - 1u);
  const float normal = std::ldexp(1.0f, f.exp0);
  for (float x : v) {
    const float q = quant::range_float_decode(f, quant::range_float_encode(f, x));
    const float err = std::abs(q - x), a = std::abs(x);
    if (x == 0) {
      ASSERT_EQ(q, 0.0f);
    } else if (a >= normal) {
      const bool saturated = q == std::copysign(max_code_value, x);
      const float rel = std::ldexp(1.0f, -(f.man_bits + (saturated ? 0 : 1)));
      ASSERT_LE(err, rel * a * (1 + 1e-6f))
          << "x " << x << " q " << q << " width " << width << " exp " << f.exp_bits << " man "
          << f.man_bits << " exp0 " << f.exp0;
    } else {
      ASSERT_LE(err, std::ldexp(1.0f, f.exp0 - f.man_bits - 1) * (1 + 1e-6f)) << "x " << x;
    }
    ASSERT_TRUE(q == 0 || std::signbit(q) == std::signbit(x));
  }
}

TEST(RangeFloat, FormatSpansTheObservedRange) {
  // 2^-3 .. 2^5: 9 binades -> fields 1..9 need 4 exponent bits; 8 bits leave 3 mantissa.
  const RangeFloat f = quant::range_float_format(40.0f, 0.2f, 8);
  EXPECT_EQ(f.exp_bits, 4);
  EXPECT_EQ(f.man_bits, 3);
  EXPECT_EQ(f.exp0, -3);
  const RangeFloat g = quant::range_float_format(40.0f, 0.2f, 16);
  EXPECT_EQ(g.exp_bits, 4);
  EXPECT_EQ(g.man_bits, 11);
  // Header word round trip.
  const RangeFloat h = quant::range_float_unpack(quant::range_float_pack(g));
  EXPECT_EQ(h.width, 16);
  EXPECT_EQ(h.exp_bits, 4);
  EXPECT_EQ(h.man_bits, 11);
  EXPECT_EQ(h.exp0, -3);
}

TEST(RangeFloat, RoundTripWithinBound) {
  for (int width : {8, 12, 16})
    for (float span : {1.0f, 6.0f, 20.0f, 60.0f}) {
      SCOPED_TRACE("width " + std::to_string(width) + " span " + std::to_string(span));
      expect_range_float_bound(log_uniform(20000, -10.0f, -10.0f + span, 7), width);
    }
}

TEST(RangeFloat, TooWideARangeKeepsTheTopBinades) {
  // 120 binades do not fit 5 exponent bits (width 6): mantissa 0, small values go to 0.
  const std::vector<float> v = log_uniform(5000, -100.0f, 20.0f, 3);
  const RangeFloat f = quant::range_float_format(max_abs(v), min_abs_nonzero(v), 6);
  EXPECT_EQ(f.exp_bits, 5);
  EXPECT_EQ(f.man_bits, 0);
  expect_range_float_bound(v, 6);
}

TEST(RangeFloat, SixteenBitsBeatEightBits) {
  const std::vector<float> v = log_uniform(20000, -8.0f, 0.0f, 11);
  double e8 = 0, e16 = 0, ref = 0;
  for (int width : {8, 16}) {
    const RangeFloat f = quant::range_float_format(max_abs(v), min_abs_nonzero(v), width);
    for (float x : v) {
      const double d = quant::range_float_decode(f, quant::range_float_encode(f, x)) - x;
      (width == 8 ? e8 : e16) += d * d;
    }
  }
  for (float x : v) ref += static_cast<double>(x) * x;
  EXPECT_LT(std::sqrt(e16 / ref), 1e-3);
  EXPECT_LT(std::sqrt(e16 / ref), std::sqrt(e8 / ref) / 100);
}

std::vector<float> gaussian(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = rng.normal();
  return v;
}

TEST(Qsgd, LevelsAreWithinOneStepAndUnbiased) {
  const std::vector<float> v = gaussian(512, 3);
  double sq = 0;
  for (float x : v) sq += static_cast<double>(x) * x;
  const float norm = static_cast<float>(std::sqrt(sq));
  const int s = 15, trials = 4000;
  std::vector<double> mean(v.size(), 0.0);
  double err2 = 0;
  for (int t = 0; t < trials; ++t)
    for (size_t i = 0; i < v.size(); ++i) {
      const int32_t l = quant::qsgd_level(v[i], norm, s, philox_uniform(9, t, i));
      ASSERT_LE(std::abs(l), s);
      const float q = quant::qsgd_value(l, norm, s);
      // Deterministic bound: one quantisation step, ||v|| / s.
      ASSERT_LE(std::abs(q - v[i]), norm / s * (1 + 1e-6f));
      mean[i] += q / trials;
      err2 += static_cast<double>(q - v[i]) * (q - v[i]) / trials;
    }
  // Unbiased: the mean over trials converges to v (standard error <= step / (2 sqrt(T))).
  for (size_t i = 0; i < v.size(); ++i)
    ASSERT_NEAR(mean[i], v[i], 5 * norm / s / std::sqrt(trials));
  // QSGD Lemma 3.1: E||Q(v) - v||^2 <= min(n / s^2, sqrt(n) / s) ||v||^2.
  const double n = static_cast<double>(v.size());
  EXPECT_LE(err2, std::min(n / (s * s), std::sqrt(n) / s) * sq);
}

TEST(TernGrad, TernaryWithinScaleAndUnbiased) {
  const std::vector<float> v = gaussian(1000, 4);
  float scale = 0;
  for (float x : v) scale = std::max(scale, std::abs(x));
  const int trials = 4000;
  std::vector<double> mean(v.size(), 0.0);
  for (int t = 0; t < trials; ++t)
    for (size_t i = 0; i < v.size(); ++i) {
      const int32_t l = quant::terngrad_level(v[i], scale, philox_uniform(5, t, i));
      ASSERT_TRUE(l == -1 || l == 0 || l == 1);
      const float q = quant::terngrad_value(l, scale);
      ASSERT_LE(std::abs(q - v[i]), scale);  // |Q - v| <= max |v|
      mean[i] += q / trials;
    }
  for (size_t i = 0; i < v.size(); ++i) ASSERT_NEAR(mean[i], v[i], 5 * scale / std::sqrt(trials));
}

// Through the Sparsifier interface: every position, values within the bound, and the
// packed words decode to exactly the selection.
void check_sparsifier(const std::string& name, const std::map<std::string, std::string>& params,
                      int64_t expect_words) {
  SparsifierOptions o;
  o.params = params;
  SparsifierPtr sp = make_sparsifier(name, o);
  const int64_t n = 3001;
  const std::vector<float> x = gaussian(n, 12);
  SelectContext ctx;
  ctx.rank = 1;
  ctx.bucket = 2;
  ctx.iteration = 3;
  Selection sel;
  select_host(*sp, ctx, x.data(), n, sel);
  ASSERT_EQ(static_cast<int64_t>(sel.indices.size()), n);
  ASSERT_EQ(static_cast<int64_t>(sel.packed.size()), expect_words);
  Selection back;
  unpack_host(*sp, ctx, n, sel.packed, back);
  EXPECT_EQ(back.indices, sel.indices);
  EXPECT_EQ(back.values, sel.values);
  const std::vector<uint32_t> short_message(sel.packed.begin(), sel.packed.end() - 1);
  EXPECT_THROW(unpack_host(*sp, ctx, n, short_message, back), Error);
  // Another rank rounds differently (its own Philox stream).
  Selection other;
  ctx.rank = 0;
  select_host(*sp, ctx, x.data(), n, other);
  EXPECT_NE(other.values, sel.values);
}

TEST(Qsgd, SparsifierPacksSignAndLevel) {
  // chunk 512: 6 norms; 15 levels: 1 + 4 bits per element.
  check_sparsifier("qsgd", {}, 6 + (3001 * 5 + 31) / 32);
  check_sparsifier("qsgd", {{"levels", "255"}, {"chunk", "0"}}, 1 + (3001 * 9 + 31) / 32);
}

// Gradient clipping (TernGrad, Sec. 3.3): the scale is c sigma when an outlier pushes
// max |x| above it, the outlier goes out as exactly +-scale, and clip=0 keeps max |x|.
TEST(TernGrad, ClipsToCSigma) {
  std::vector<float> x = gaussian(4000, 31);
  x[7] = 50.0f;
  double mean = 0, var = 0;
  for (float v : x) mean += v / 4000.0;
  for (float v : x) var += (v - mean) * (v - mean) / 4000.0;
  auto scale_of = [&](const std::map<std::string, std::string>& params, Selection& sel) {
    SparsifierOptions o;
    o.params = params;
    SelectContext ctx;
    select_host(*make_sparsifier("terngrad", o), ctx, x.data(), 4000, sel);
    float s;
    std::memcpy(&s, sel.packed.data(), 4);  // the chunk's scale leads the wire format
    return s;
  };
  Selection sel;
  const float clipped = scale_of({}, sel);  // default clip = 2.5
  EXPECT_NEAR(clipped, 2.5 * std::sqrt(var), 1e-5 * clipped);
  EXPECT_LT(clipped, 5.0f);
  EXPECT_EQ(sel.values[7], clipped) << "the outlier is clipped to +scale";
  for (float v : sel.values) ASSERT_TRUE(v == 0.0f || std::abs(v) == clipped);
  EXPECT_EQ(scale_of({{"clip", "0"}}, sel), 50.0f) << "clip=0 keeps max |x|";
  EXPECT_EQ(scale_of({{"clip", "100"}}, sel), 50.0f) << "c sigma above max |x| changes nothing";
  SparsifierOptions bad;
  bad.params = {{"clip", "-1"}};
  EXPECT_THROW(make_sparsifier("terngrad", bad), Error);
}

TEST(TernGrad, SparsifierPacksTwoBits) {
  check_sparsifier("terngrad", {}, 1 + (3001 * 2 + 31) / 32);
  check_sparsifier("terngrad", {{"chunk", "1000"}}, 4 + (3001 * 2 + 31) / 32);
}

}  // namespace
}  // namespace st::test

#ifdef SPARSETRAIN_WITH_CUDA
#include "core/storage.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/cuda_ops.h"
#include "sparsify/kernels/quant_cuda.h"
#include "sparsify/sidco_fit.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {
namespace {

// The CUDA kernels behind the quantisation passes against the CPU implementation of
// bulk::Ops: bit for bit given the same scales (norms and maxima come back from the
// device, whose summation order differs).
TEST(QuantizeCuda, KernelsMatchTheCpuImplementation) {
  ST_REQUIRE_CUDA_DEVICE();
  const int64_t n = 10001;
  const std::vector<float> x = gaussian(n, 21);
  const Device gpu = Device::cuda(0);
  const Tensor xd = Tensor::from_vector(x, {n}).to(gpu);
  bulk::CpuOps cpu;
  bulk::Buffer xb, scales, codes, values, words;
  cpu.upload(x.data(), bulk::Elem::F32, n, xb);
  std::vector<bulk::QuantSpec> specs(3);
  specs[0].kind = bulk::QuantKind::Qsgd, specs[0].chunk = 512, specs[0].levels = 15;
  specs[1].kind = bulk::QuantKind::TernGrad, specs[1].chunk = 1000, specs[1].clip = 2.5f;
  specs[2].kind = bulk::QuantKind::Sign, specs[2].starts = {0, 10, 5000};
  for (bulk::QuantSpec& q : specs) {
    q.seed = 3;
    q.stream = quant::rounding_stream(1, 2, 3);
    const int64_t G = q.groups(n);
    cpu.quantize(q, xb, scales, codes, values);
    std::vector<float> cs(G);
    std::vector<uint32_t> cc(n);
    cpu.download(scales, 0, G, cs.data());
    cpu.download(codes, 0, n, cc.data());
    Tensor s = Tensor::empty({G}, DType::F32, gpu), c = Tensor::empty({n}, DType::I32, gpu),
           v = Tensor::empty({n}, DType::F32, gpu);
    auto* cd = reinterpret_cast<uint32_t*>(c.data<int32_t>());
    quant::quantize_cuda(q, xd.f32(), n, s.f32(), cd, v.f32());
    const Tensor sh = s.to(Device::cpu()), ch = c.to(Device::cpu());
    for (int64_t g = 0; g < G; ++g) ASSERT_NEAR(sh.f32()[g], cs[g], 1e-5 * cs[g]) << g;
    // Codes from the device's scales: the CPU formula on those scales.
    for (int64_t i = 0; i < n; ++i) {
      const float u = philox_uniform(q.seed, q.stream, i);
      const float sc = sh.f32()[q.kind == bulk::QuantKind::Sign ? (i < 10     ? 0
                                                                   : i < 5000 ? 1
                                                                              : 2)
                                                                : i / q.chunk];
      const uint32_t want = q.kind == bulk::QuantKind::Qsgd
                                ? quant::level_code(quant::qsgd_level(x[i], sc, 15, u), q.bits())
                            : q.kind == bulk::QuantKind::TernGrad
                                ? quant::level_code(quant::terngrad_level(x[i], sc, u), 2)
                                : (x[i] < 0 ? 1u : 0u);
      ASSERT_EQ(static_cast<uint32_t>(ch.data<int32_t>()[i]), want) << i;
    }
    // Packing and dequantising on the device give the CPU's words and values.
    const int64_t nw = (n * q.bits() + 31) / 32;
    Tensor w = Tensor::empty({G + nw}, DType::I32, gpu),
           back_d = Tensor::empty({n}, DType::I32, gpu), deq = Tensor::empty({n}, DType::F32, gpu);
    auto* wd = reinterpret_cast<uint32_t*>(w.data<int32_t>());
    cuda::copy_bytes(wd, gpu, s.f32(), gpu, 4 * static_cast<size_t>(G));
    quant::pack_bits_cuda(cd, n, q.bits(), wd + G);
    quant::unpack_bits_cuda(wd + G, n, q.bits(),
                            reinterpret_cast<uint32_t*>(back_d.data<int32_t>()));
    quant::dequantize_cuda(q, reinterpret_cast<uint32_t*>(back_d.data<int32_t>()), n, wd,
                           deq.f32());
    cpu.resize(words, bulk::Elem::U32, G + nw);
    const Tensor wh = w.to(Device::cpu());
    cpu.upload(wh.data<int32_t>(), bulk::Elem::U32, G + nw, words);
    std::vector<uint32_t> host_codes(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) host_codes[i] = static_cast<uint32_t>(ch.data<int32_t>()[i]);
    bulk::Buffer hc, hw, hv;
    cpu.upload(host_codes.data(), bulk::Elem::U32, n, hc);
    cpu.resize(hw, bulk::Elem::U32, G + nw);
    cpu.copy(words, 0, hw, 0, G);
    cpu.pack_bits(hc, q.bits(), hw, G);
    EXPECT_TRUE(cpu.same_bits(hw, words)) << "pack_bits";
    cpu.dequantize(q, hc, words, 0, hv);
    const Tensor dh = deq.to(Device::cpu());
    std::vector<float> hvv(static_cast<size_t>(n));
    cpu.download(hv, 0, n, hvv.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dh.f32()[i], hvv[i]) << i;
  }
  const quant::RangeFloat f = quant::range_float_format(max_abs(x), min_abs_nonzero(x), 8);
  Tensor codes_d = Tensor::empty({n}, DType::I32, gpu), value = Tensor::empty({n}, DType::F32, gpu);
  quant::range_float_cuda(xd.f32(), n, f, reinterpret_cast<uint32_t*>(codes_d.data<int32_t>()),
                          value.f32());
  const Tensor c = codes_d.to(Device::cpu());
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(static_cast<uint32_t>(c.data<int32_t>()[i]), quant::range_float_encode(f, x[i]));
  EXPECT_EQ(quant::abs_min_nonzero_cuda(xd.f32(), n), min_abs_nonzero(x));
}

TEST(QuantizeCuda, SidcoEstimateMatchesTheCpu) {
  ST_REQUIRE_CUDA_DEVICE();
  const int64_t n = 200000;
  const std::vector<float> x = gaussian(n, 22);
  bulk::CpuOps cpu;
  bulk::CudaOps gpu(Device::cuda(0));
  bulk::Buffer xc, xg;
  cpu.upload(x.data(), bulk::Elem::F32, n, xc);
  gpu.upload(x.data(), bulk::Elem::F32, n, xg);
  for (sidco::Variant v : {sidco::Variant::E, sidco::Variant::P, sidco::Variant::GP}) {
    sidco::Workspace wc, wg;
    const sidco::Estimate on_cpu = sidco::estimate(cpu, xc, v, 3, 0.001, wc);
    const sidco::Estimate on_gpu = sidco::estimate(gpu, xg, v, 3, 0.001, wg);
    EXPECT_NEAR(on_gpu.tau, on_cpu.tau, 1e-4 * on_cpu.tau) << sidco::variant_name(v);
  }
}

}  // namespace
}  // namespace st::test
#endif
