// One case per operation of bulk::Ops, generated from the operation list (op_list.h): each
// row runs its operation on fixed inputs and returns every output (buffers as their bits,
// host values), and every row runs on the CPU implementation, on the emulated device
// (bulk::EmuOps: the same kernels queued on a stream) and, where a GPU exists, on CUDA.
// The emulated device must give the CPU's bits for every operation; CUDA gives them where
// the operation's contract says bit-exact, and close values (or the same set) elsewhere.
// An operation added to op_list.h without a row here fails `EveryOperationHasARow`.
// ggml's test-backend-ops is the model: one table, every backend against the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/local_communicator.h"
#include "core/device.h"
#include "core/rng.h"
#include "sparsify/bulk/bulk_ops.h"
#include "sparsify/bulk/cpu_ops.h"
#include "sparsify/bulk/emu_ops.h"
#include "sparsify/quantizers.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {
namespace {

using bulk::Buffer;
using bulk::Elem;
using bulk::Ops;

// What a row returns: every output as 64-bit words (buffer elements as their 32-bit
// patterns, host values as double bits), named for the failure message.
struct Outputs {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> items;

  void add(const std::string& name, std::vector<uint64_t> words) {
    items.emplace_back(name, std::move(words));
  }
  void add_value(const std::string& name, double v) {
    uint64_t w;
    std::memcpy(&w, &v, 8);
    add(name, {w});
  }
  void add_buffer(Ops& ops, const std::string& name, const Buffer& b) {
    std::vector<uint32_t> h(static_cast<size_t>(b.size()));
    ops.download(b, 0, b.size(), h.data());
    add(name + (b.elem() == Elem::F32 ? " (f32)" : " (i32/u32)"),
        std::vector<uint64_t>(h.begin(), h.end()));
  }
  void add_moments(const std::string& name, const sidco::Moments& m) {
    add_value(name + ".count", static_cast<double>(m.count));
    for (double v : {m.sum, m.sumsq, m.sumlog, m.min}) add_value(name + ".sums", v);
  }
};

// How CUDA's outputs compare with the CPU's (the contract in op_list.h).
enum class OnCuda { Bits, Close, SameSet };

struct Row {
  std::function<Outputs(Ops&, Communicator&)> run;
  OnCuda on_cuda = OnCuda::Bits;
};

// Inputs with ties, zeros and both signs.
std::vector<float> data(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = std::round(rng.normal() * std::abs(rng.normal()) * 64.0f) / 64.0f;
  return x;
}

Buffer up_f32(Ops& ops, const std::vector<float>& h) {
  Buffer b;
  ops.upload(h.data(), Elem::F32, std::ssize(h), b);
  return b;
}
Buffer up_i32(Ops& ops, const std::vector<int32_t>& h) {
  Buffer b;
  ops.upload(h.data(), Elem::I32, std::ssize(h), b);
  return b;
}

constexpr int64_t kN = 5000;
const part::Range kAll{0, kN};
const part::Range kPart{700, 4100};

// A pass for run_pass / run_pass_waiting: y = 2 x + 1; the result counts x > 0.
class TwiceAndOne final : public bulk::Pass {
 public:
  const char* name() const override { return "case table: 2 x + 1"; }
  bulk::PassResult on_host(const bulk::PassMemory& m) const override {
    bulk::PassResult r;
    for (int64_t i = 0; i < m.n(0); ++i) {
      m.f32(1)[i] = 2.0f * m.f32(0)[i] + 1.0f;
      r.count += m.f32(0)[i] > 0;
    }
    return r;
  }
};

std::map<std::string, Row> rows() {
  std::map<std::string, Row> t;
  auto x_of = [](Ops& ops) { return up_f32(ops, data(kN, 1)); };
  // --- core ---
  t["resize"] = {[](Ops& ops, Communicator&) {
    Outputs o;
    Buffer b;
    ops.resize(b, Elem::I32, 17);
    o.add_value("size", static_cast<double>(b.size()));
    ops.resize(b, Elem::F32, 3);
    o.add_value("smaller", static_cast<double>(b.size()));
    return o;
  }};
  auto wrap_row = [](Ops& ops, Communicator&) {
    Outputs o;
    Tensor t = Tensor::from_vector(data(64, 2), {64}).to(ops.device());
    Buffer w = ops.wrap(t);
    ops.scale(w, {0, 64}, 3.0f);
    o.add_buffer(ops, "wrapped", w);
    ops.release(w);
    o.add_value("first after release", t.to(Device::cpu()).f32()[1]);
    return o;
  };
  t["wrap"] = {wrap_row};
  t["release"] = {wrap_row};
  auto updown = [](Ops& ops, Communicator&) {
    Outputs o;
    const std::vector<float> h = data(300, 3);
    Buffer b = up_f32(ops, h);
    std::vector<float> back(100);
    ops.download(b, 150, 100, back.data());
    o.add("download", std::vector<uint64_t>(back.begin(), back.end()));
    o.add_buffer(ops, "upload", b);
    return o;
  };
  t["upload"] = {updown};
  t["download"] = {updown};
  t["copy"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops), y = up_f32(ops, data(kN, 4));
    ops.copy(x, 10, y, 2000, 1500);
    o.add_buffer(ops, "dst", y);
    return o;
  }};
  t["slice"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops);
    Buffer s = ops.slice(x, 100, 50);
    ops.fill(s, {0, 50}, -2.0f);
    o.add_buffer(ops, "slice", s);
    o.add_buffer(ops, "base", x);
    return o;
  }};
  t["finish"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops);
    ops.scale(x, kAll, 0.5f);
    ops.finish();
    o.add_buffer(ops, "after the fence", x);
    return o;
  }};
  t["fill"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops);
    ops.fill(x, kPart, 7.25f);
    o.add_buffer(ops, "x", x);
    return o;
  }};
  t["iota"] = {[](Ops& ops, Communicator&) {
    Outputs o;
    Buffer b;
    ops.iota(b, 1234, -5);
    o.add_buffer(ops, "iota", b);
    return o;
  }};
  t["axpy"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops), y = up_f32(ops, data(kN, 5));
    ops.axpy(-0.375f, x, kPart, y);
    o.add_buffer(ops, "y", y);
    return o;
  }};
  t["scale"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops);
    ops.scale(x, kPart, 0.1f);
    o.add_buffer(ops, "x", x);
    return o;
  }};
  t["stats"] = {[x_of](Ops& ops, Communicator&) {
                  Outputs o;
                  const bulk::Stats s = ops.stats(x_of(ops), kPart);
                  o.add_value("count", static_cast<double>(s.count));
                  for (double v : {s.sum, s.sum_sq, s.abs_sum, static_cast<double>(s.abs_max)})
                    o.add_value("sums", v);
                  return o;
                },
                OnCuda::Close};
  t["index_bounds"] = {[](Ops& ops, Communicator&) {
    Outputs o;
    const bulk::IndexBounds b = ops.index_bounds(up_i32(ops, {7, -3, 12, 0, 4}));
    o.add_value("min", static_cast<double>(b.min));
    o.add_value("max", static_cast<double>(b.max));
    return o;
  }};
  t["select_abs"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops), a, b;
    ops.select_abs(x, kPart, 1.0f, false, a);
    ops.select_abs(x, kPart, 1.0f, true, b);
    o.add_buffer(ops, ">=", a);
    o.add_buffer(ops, ">", b);
    return o;
  }};
  t["topk_abs"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops), out;
    o.add_value("k-th", ops.topk_abs(x, kPart, 77, out));
    o.add_buffer(ops, "positions", out);
    return o;
  }};
  t["union_of"] = {[](Ops& ops, Communicator&) {
                     Outputs o;
                     Buffer all = up_i32(ops, {5, 9, 1, 9, 30, 5, 2}), out;
                     ops.union_of(all, {0, 3, 5}, {3, 2, 2}, 40, out);
                     o.add_buffer(ops, "union", out);
                     return o;
                   },
                   OnCuda::SameSet};
  t["gather"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops), out;
    ops.gather(x, up_i32(ops, {4999, 0, 17, 17, 2500}), out);
    o.add_buffer(ops, "gathered", out);
    return o;
  }};
  t["scatter_axpy"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer y = x_of(ops);
    ops.scatter_axpy(-1.5f, up_i32(ops, {3, 8, 3, 4000}), up_f32(ops, {0.1f, 2, 3.3f, -4}), y);
    o.add_buffer(ops, "y", y);
    return o;
  }};
  t["scatter_scaled"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer y = x_of(ops);
    ops.scatter_scaled(up_i32(ops, {3, 8, 3, 4000}), up_f32(ops, {0.1f, 2, 3.3f, -4}), 0.25f, y);
    o.add_buffer(ops, "y", y);
    return o;
  }};
  t["zero_at"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer y = x_of(ops);
    ops.zero_at(up_i32(ops, {0, 4999, 77}), y);
    o.add_buffer(ops, "y", y);
    return o;
  }};
  auto pass_row = [x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops), y, z;
    ops.resize(y, Elem::F32, kN);
    ops.resize(z, Elem::F32, kN);
    ops.run_pass(std::make_shared<TwiceAndOne>(), {&x, &y});
    const bulk::PassResult r = ops.run_pass_waiting(std::make_shared<TwiceAndOne>(), {&y, &z});
    o.add_buffer(ops, "queued", y);
    o.add_buffer(ops, "waited", z);
    o.add_value("count", static_cast<double>(r.count));
    return o;
  };
  t["run_pass"] = {pass_row};
  t["run_pass_waiting"] = {pass_row};
  // A world of one: each collective's own shape of output, staged however the device needs.
  t["allreduce_sum"] = {[x_of](Ops& ops, Communicator& c) {
    Outputs o;
    Buffer x = x_of(ops);
    ops.allreduce_sum(c, x);
    o.add_buffer(ops, "sum", x);
    return o;
  }};
  t["allgatherv"] = {[x_of](Ops& ops, Communicator& c) {
    Outputs o;
    Buffer in = ops.slice(x_of(ops), 0, 33), out;
    ops.resize(out, Elem::F32, 33);
    ops.allgatherv(c, in, {33}, out);
    o.add_buffer(ops, "gathered", out);
    return o;
  }};
  t["allgather"] = {[x_of](Ops& ops, Communicator& c) {
    Outputs o;
    Buffer in = ops.slice(x_of(ops), 0, 40), out;
    ops.resize(out, Elem::F32, 40);
    ops.allgather(c, in, out);
    o.add_buffer(ops, "gathered", out);
    return o;
  }};
  t["broadcast"] = {[x_of](Ops& ops, Communicator& c) {
    Outputs o;
    Buffer x = x_of(ops);
    ops.broadcast(c, x, 0);
    o.add_buffer(ops, "x", x);
    return o;
  }};
  // --- threshold extras ---
  t["count_abs"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops);
    bulk::ThresholdOps& th = bulk::need<bulk::ThresholdOps>(ops, "case table");
    o.add_value(">=", static_cast<double>(th.count_abs(x, kPart, 1.0f, false)));
    o.add_value(">", static_cast<double>(th.count_abs(x, kPart, 1.0f, true)));
    return o;
  }};
  t["threshold_select"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops), a, b;
    bulk::ThresholdOps& th = bulk::need<bulk::ThresholdOps>(ops, "case table");
    th.threshold_select(x, kPart, 0.5f, 3, a);
    th.threshold_select(x, kPart, 1e9f, 3, b);  // nothing passes: the fallback position
    o.add_buffer(ops, "passing", a);
    o.add_buffer(ops, "fallback", b);
    return o;
  }};
  t["topk_abs_among"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer x = x_of(ops), cand, out;
    ops.iota(cand, 2000, 1000);
    bulk::ThresholdOps& th = bulk::need<bulk::ThresholdOps>(ops, "case table");
    o.add_value("k-th", th.topk_abs_among(x, cand, 40, out));
    o.add_buffer(ops, "positions", out);
    return o;
  }};
  t["exceed_moments"] = {[x_of](Ops& ops, Communicator&) {
                           Outputs o;
                           Buffer x = x_of(ops);
                           bulk::ThresholdOps& th = bulk::need<bulk::ThresholdOps>(ops, "t");
                           o.add_moments("all", th.exceed_moments(x, kAll, -1.0f, 0));
                           o.add_moments("log", th.exceed_moments(x, kAll, -1.0f, 2.0));
                           o.add_moments("above", th.exceed_moments(x, kPart, 0.5f, 0));
                           return o;
                         },
                         OnCuda::Close};
  t["exceed_compact"] = {
      [x_of](Ops& ops, Communicator&) {
        Outputs o;
        Buffer x = x_of(ops), idx, vals, idx2, vals2;
        bulk::ThresholdOps& th = bulk::need<bulk::ThresholdOps>(ops, "t");
        o.add_moments("stage 1", th.exceed_compact(x, kAll, 0.5f, nullptr, idx, vals));
        o.add_moments("stage 2",
                      th.exceed_compact(vals, {0, vals.size()}, 1.0f, &idx, idx2, vals2));
        o.add_buffer(ops, "positions", idx2);
        o.add_buffer(ops, "values", vals2);
        return o;
      },
      OnCuda::Close};
  // --- quantisation ---
  auto spec = [](bulk::QuantKind kind) {
    bulk::QuantSpec q;
    q.kind = kind;
    q.chunk = 1024;
    q.levels = 7;
    q.seed = 9;
    q.stream = 4;
    return q;
  };
  auto quant_row = [x_of, spec](Ops& ops, Communicator&) {
    Outputs o;
    bulk::QuantOps& q = bulk::need<bulk::QuantOps>(ops, "case table");
    Buffer x = x_of(ops);
    for (bulk::QuantKind kind :
         {bulk::QuantKind::Qsgd, bulk::QuantKind::TernGrad, bulk::QuantKind::Sign}) {
      Buffer scales, codes, values, words, back;
      const bulk::QuantSpec s = spec(kind);
      q.quantize(s, x, scales, codes, values);
      o.add_buffer(ops, "codes", codes);
      o.add_buffer(ops, "values", values);
      // dequantize reads the scales as float bits from a word buffer.
      ops.resize(words, Elem::U32, scales.size() + 2);
      ops.copy(scales, 0, words, 2, scales.size());
      q.dequantize(s, codes, words, 2, back);
      o.add_buffer(ops, "dequantized", back);
    }
    return o;
  };
  t["quantize"] = {quant_row, OnCuda::Close};
  t["dequantize"] = {quant_row, OnCuda::Close};
  auto bits_row = [](Ops& ops, Communicator&) {
    Outputs o;
    bulk::QuantOps& q = bulk::need<bulk::QuantOps>(ops, "case table");
    std::vector<int32_t> codes(333);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<int32_t>((i * 37) % 32);
    Buffer c = up_i32(ops, codes), words, back;
    ops.resize(words, Elem::U32, 3 + (333 * 5 + 31) / 32);
    ops.fill(words, {0, words.size()}, 0.0f);
    q.pack_bits(c, 5, words, 3);
    q.unpack_bits(words, 3, 333, 5, back);
    o.add_buffer(ops, "words", words);
    o.add_buffer(ops, "codes", back);
    return o;
  };
  t["pack_bits"] = {bits_row};
  t["unpack_bits"] = {bits_row};
  auto range_row = [x_of](Ops& ops, Communicator&) {
    Outputs o;
    bulk::QuantOps& q = bulk::need<bulk::QuantOps>(ops, "case table");
    const quant::RangeFloat f = quant::range_float_format(40.0f, 1.0f / 64, 10);
    Buffer x = x_of(ops), codes, values, back;
    q.range_float_quantize(f, x, codes, values);
    q.range_float_dequantize(f, codes, back);
    o.add_buffer(ops, "codes", codes);
    o.add_buffer(ops, "values", values);
    o.add_buffer(ops, "decoded", back);
    return o;
  };
  t["range_float_quantize"] = {range_row};
  t["range_float_dequantize"] = {range_row};
  t["abs_min_nonzero"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    bulk::QuantOps& q = bulk::need<bulk::QuantOps>(ops, "case table");
    o.add_value("min", q.abs_min_nonzero(x_of(ops), kPart));
    o.add_value("zeros", q.abs_min_nonzero(up_f32(ops, {0, 0, 0}), {0, 3}));
    return o;
  }};
  t["same_bits"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    bulk::QuantOps& q = bulk::need<bulk::QuantOps>(ops, "case table");
    Buffer a = x_of(ops), b = x_of(ops);
    o.add_value("same", q.same_bits(a, b));
    ops.fill(b, {9, 10}, 0.5f);
    o.add_value("one differs", q.same_bits(a, b));
    return o;
  }};
  // --- transforms ---
  const std::vector<bulk::FftPiece> pieces = {{0, 1000, 0}, {1000, 999, 1002}};
  auto fft_row = [x_of, pieces](Ops& ops, Communicator&) {
    Outputs o;
    bulk::TransformOps& tr = bulk::need<bulk::TransformOps>(ops, "case table");
    Buffer x = x_of(ops), coef, back, mag, sel, pairs;
    ops.resize(coef, Elem::F32, 1002 + 1000);
    tr.rfft(x, pieces, coef);
    ops.resize(back, Elem::F32, kN);
    ops.fill(back, kAll, 0.0f);
    tr.irfft(coef, pieces, back);
    tr.sq_magnitudes(coef, mag);
    o.add_buffer(ops, "coefficients", coef);
    o.add_buffer(ops, "inverse", back);
    o.add_buffer(ops, "magnitudes", mag);
    return o;
  };
  t["rfft"] = {fft_row, OnCuda::Close};
  t["irfft"] = {fft_row, OnCuda::Close};
  t["sq_magnitudes"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer mag;
    bulk::need<bulk::TransformOps>(ops, "case table").sq_magnitudes(x_of(ops), mag);
    o.add_buffer(ops, "magnitudes", mag);
    return o;
  }};
  t["topk_abs_ranges"] = {[x_of](Ops& ops, Communicator&) {
    Outputs o;
    Buffer out;
    bulk::TransformOps& tr = bulk::need<bulk::TransformOps>(ops, "case table");
    o.add_value(
        "smallest k-th",
        tr.topk_abs_ranges(x_of(ops), {{0, 1000, 9}, {1500, 1600, 100}, {4000, 5000, 1}}, out));
    o.add_buffer(ops, "positions", out);
    return o;
  }};
  t["pair_indices"] = {[](Ops& ops, Communicator&) {
    Outputs o;
    Buffer out;
    bulk::need<bulk::TransformOps>(ops, "case table").pair_indices(up_i32(ops, {0, 7, 3}), out);
    o.add_buffer(ops, "pairs", out);
    return o;
  }};
  // --- low rank ---
  t["gemm"] = {[x_of](Ops& ops, Communicator&) {
                 Outputs o;
                 Buffer x = x_of(ops), c = up_f32(ops, data(200, 6));
                 bulk::LowRankOps& lr = bulk::need<bulk::LowRankOps>(ops, "case table");
                 lr.gemm(false, false, 10, 20, 30, 1.0f, x, 0, x, 300, 0.0f, c, 0);
                 lr.gemm(true, false, 10, 20, 30, 0.5f, x, 1000, x, 2000, 1.0f, c, 0);
                 o.add_buffer(ops, "C", c);
                 return o;
               },
               OnCuda::Close};
  // --- tensor scope ---
  t["offset_indices"] = {[](Ops& ops, Communicator&) {
    Outputs o;
    Buffer idx = up_i32(ops, {0, 5, 9});
    bulk::need<bulk::ScopeOps>(ops, "case table").offset_indices(idx, 1000);
    o.add_buffer(ops, "idx", idx);
    return o;
  }};
  t["segment_counts"] = {[](Ops& ops, Communicator&) {
    Outputs o;
    const std::vector<int64_t> counts =
        bulk::need<bulk::ScopeOps>(ops, "case table")
            .segment_counts(up_i32(ops, {0, 3, 10, 11, 25, 90}), 1, 5, {0, 10, 20, 50});
    for (int64_t c : counts) o.add_value("count", static_cast<double>(c));
    return o;
  }};
  return t;
}

// Every operation of op_list.h, by name.
std::vector<std::string> listed_operations() {
  return {
#define ST_CASE_NAME(Family, Mode, ret, name, ...) #name,
      ST_BULK_ALL_OPS(ST_CASE_NAME)
#undef ST_CASE_NAME
  };
}

Outputs run_row(const std::string& op, Ops& ops) {
  LocalCommunicator one;
  return rows().at(op).run(ops, one);
}

void expect_bits(const Outputs& want, const Outputs& got, const std::string& where) {
  ASSERT_EQ(got.items.size(), want.items.size()) << where;
  for (size_t i = 0; i < want.items.size(); ++i)
    EXPECT_EQ(got.items[i].second, want.items[i].second)
        << where << ": output " << i << " (" << want.items[i].first << ")";
}

double as_number(const std::string& name, uint64_t w) {
  if (name.find("(f32)") != std::string::npos) {
    float f;
    const auto u = static_cast<uint32_t>(w);
    std::memcpy(&f, &u, 4);
    return f;
  }
  if (name.find("(i32/u32)") != std::string::npos) return static_cast<double>(w);
  double d;
  std::memcpy(&d, &w, 8);
  return d;
}

void expect_close(const Outputs& want, const Outputs& got, OnCuda how) {
  ASSERT_EQ(got.items.size(), want.items.size());
  for (size_t i = 0; i < want.items.size(); ++i) {
    const auto& [name, w] = want.items[i];
    std::vector<uint64_t> g = got.items[i].second, c = w;
    if (how == OnCuda::SameSet) {
      std::sort(g.begin(), g.end());
      std::sort(c.begin(), c.end());
      EXPECT_EQ(g, c) << name;
      continue;
    }
    ASSERT_EQ(g.size(), c.size()) << name;
    for (size_t j = 0; j < c.size(); ++j) {
      const double a = as_number(name, c[j]), b = as_number(name, g[j]);
      if (std::isinf(a) || std::isnan(a)) {
        EXPECT_EQ(c[j], g[j]) << name << "[" << j << "]";
      } else {
        EXPECT_NEAR(b, a, 1e-4 * (1 + std::abs(a))) << name << "[" << j << "]";
      }
    }
  }
}

TEST(BulkCases, EveryOperationHasARow) {
  const std::map<std::string, Row> table = rows();
  for (const std::string& op : listed_operations())
    EXPECT_TRUE(table.count(op)) << op << " (op_list.h) has no row in the case table";
  EXPECT_EQ(table.size(), listed_operations().size()) << "a row names no listed operation";
}

class BulkCase : public ::testing::TestWithParam<std::string> {};

TEST_P(BulkCase, EmulatedDeviceGivesTheCpuBits) {
  bulk::CpuOps cpu;
  bulk::EmuOps emu(Device::emu(0));
  const Outputs want = run_row(GetParam(), cpu);
  ASSERT_FALSE(want.items.empty());
  expect_bits(want, run_row(GetParam(), emu), "emu");
}

TEST_P(BulkCase, CudaAgreesWithTheCpu) {
  if (!bulk::cuda_ops_built()) GTEST_SKIP() << "this build has no CUDA implementation";
  ST_REQUIRE_CUDA_DEVICE();
  bulk::CpuOps cpu;
  const bulk::OpsPtr gpu = bulk::make_cuda_ops(Device::cuda(0));
  const Outputs want = run_row(GetParam(), cpu), got = run_row(GetParam(), *gpu);
  const OnCuda how = rows().at(GetParam()).on_cuda;
  if (how == OnCuda::Bits) {
    expect_bits(want, got, "cuda");
  } else {
    expect_close(want, got, how);
  }
}

INSTANTIATE_TEST_SUITE_P(OpList, BulkCase, ::testing::ValuesIn(listed_operations()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace st::test
