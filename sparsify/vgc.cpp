#include "sparsify/vgc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "sparsify/bulk/cpu_common.h"
#include "sparsify/bulk/pass.h"
#include "sparsify/quant_math.h"
#if SPARSETRAIN_WITH_CUDA
#include "sparsify/vgc_cuda.h"
#endif

namespace st {

namespace {
// The --sp keys, spelled once: keys() declares them, the constructor reads them.
constexpr char kAlpha[] = "alpha", kZeta[] = "zeta", kTau[] = "tau", kBatch[] = "batch";

using bulk::PassMemory;
using bulk::PassResult;
using bulk::cpu_detail::kParallelMin;

// The variance test (Tsuzuku et al. 2018) over buffers (x, aux, grad, v, out): vi = v +
// add (aux, or grad^2 inv_batch); send when x^2 > alpha vi or |x| > tau > 0: v = 0 and
// the position to `out` (room for every position, ascending); else v = vi zeta. Returns
// how many were sent and the largest |x| sent.
class TestPass final : public bulk::Pass {
 public:
  TestPass(float inv_batch, float alpha, float zeta, float tau)
      : inv_batch_(inv_batch), alpha_(alpha), zeta_(zeta), tau_(tau) {}
  const char* name() const override { return "vgc variance test"; }

  // Fixed blocks, each with its own hits, joined in block order: the result does not
  // depend on the thread count.
  PassResult on_host(const PassMemory& b) const override {
    const int64_t n = b.n(0);
    const float *x = b.f32(0), *aux = b.f32(1), *grad = b.f32(2);
    float* v = b.f32(3);
    constexpr int64_t kBlock = bulk::cpu_detail::kSumBlock;
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<std::vector<int32_t>> hits(static_cast<size_t>(blocks));
    std::vector<float> largest(static_cast<size_t>(blocks), 0.0f);
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t end = std::min(n, (blk + 1) * kBlock);
      for (int64_t i = blk * kBlock; i < end; ++i) {
        const float vi = v[i] + (aux ? aux[i] : grad[i] * grad[i] * inv_batch_);
        if (sends(x[i], vi)) {
          hits[static_cast<size_t>(blk)].push_back(static_cast<int32_t>(i));
          largest[static_cast<size_t>(blk)] =
              std::max(largest[static_cast<size_t>(blk)], std::abs(x[i]));
          v[i] = 0.0f;
        } else {
          v[i] = vi * zeta_;
        }
      }
    }
    PassResult r;
    int32_t* out = b.i32(4);
    for (size_t blk = 0; blk < hits.size(); ++blk) {
      std::copy(hits[blk].begin(), hits[blk].end(), out + r.count);
      r.count += static_cast<int64_t>(hits[blk].size());
      r.value = std::max<double>(r.value, largest[blk]);
    }
    return r;
  }
#if SPARSETRAIN_WITH_CUDA
  PassResult on_cuda(const PassMemory& b) const override {
    float largest = 0.0f;
    const int64_t count = vgc::test_cuda(b.f32(0), b.f32(1), b.f32(2), b.n(0), inv_batch_, alpha_,
                                         zeta_, tau_, b.f32(3), b.i32(4), &largest);
    return {count, largest};
  }
#endif

 private:
  bool sends(float r, float vi) const {
    return r * r > alpha_ * vi || (tau_ > 0 && std::abs(r) > tau_);
  }
  float inv_batch_, alpha_, zeta_, tau_;
};

// The wire words of a selection over buffers (x, idx, packed, values): packed = the bits
// of `scale`, then quant::vgc_encode per entry; values = their decoding.
class PackPass final : public bulk::Pass {
 public:
  PackPass(float scale, int index_bits) : scale_(scale), bits_(index_bits) {}
  const char* name() const override { return "vgc pack"; }
  PassResult on_host(const PassMemory& b) const override {
    const float* x = b.f32(0);
    const int32_t* idx = b.i32(1);
    uint32_t* w = b.u32(2);
    float* values = b.f32(3);
    const int64_t m = b.n(1);
    w[0] = bulk::cpu_detail::float_bits(scale_);
#pragma omp parallel for schedule(static) if (m > kParallelMin)
    for (int64_t j = 0; j < m; ++j) {
      w[j + 1] = quant::vgc_encode(idx[j], x[idx[j]], scale_, bits_);
      values[j] = quant::vgc_value(w[j + 1], scale_, bits_);
    }
    return {};
  }
#if SPARSETRAIN_WITH_CUDA
  PassResult on_cuda(const PassMemory& b) const override {
    vgc::pack_cuda(b.f32(0), b.i32(1), b.n(1), scale_, bits_, b.u32(2), b.f32(3));
    return {};
  }
#endif

 private:
  float scale_;
  int bits_;
};

// The inverse over buffers (words, idx, values), reading `count` words from `offset`.
class UnpackPass final : public bulk::Pass {
 public:
  UnpackPass(int64_t offset, int64_t count, int index_bits)
      : offset_(offset), count_(count), bits_(index_bits) {}
  const char* name() const override { return "vgc unpack"; }
  PassResult on_host(const PassMemory& b) const override {
    const uint32_t* w = b.u32(0) + offset_;
    int32_t* idx = b.i32(1);
    float* values = b.f32(2);
    const float scale = bulk::cpu_detail::bits_float(w[0]);
    const int64_t m = count_ - 1;
#pragma omp parallel for schedule(static) if (m > kParallelMin)
    for (int64_t j = 0; j < m; ++j) {
      idx[j] = quant::vgc_index(w[j + 1], bits_);
      values[j] = quant::vgc_value(w[j + 1], scale, bits_);
    }
    return {};
  }
#if SPARSETRAIN_WITH_CUDA
  PassResult on_cuda(const PassMemory& b) const override {
    vgc::unpack_cuda(b.u32(0) + offset_, count_, bits_, b.i32(1), b.f32(2));
    return {};
  }
#endif

 private:
  int64_t offset_, count_;
  int bits_;
};

}  // namespace

namespace vgc {

float test(bulk::Ops& ops, const bulk::Buffer& x, const bulk::Buffer* aux, const bulk::Buffer* grad,
           float inv_batch, float alpha, float zeta, float tau, bulk::Buffer& v,
           bulk::Buffer& out) {
  const int64_t n = x.size();
  ST_CHECK(v.size() == n && (aux || grad), "vgc: x of ", n, " elements, v of ", v.size(),
           aux || grad ? "" : ", neither aux nor grad");
  ops.resize(out, bulk::Elem::I32, n);
  const PassResult sent = ops.run_pass_waiting(
      std::make_shared<TestPass>(inv_batch, alpha, zeta, tau), {&x, aux, grad, &v, &out});
  ops.resize(out, bulk::Elem::I32, sent.count);
  return static_cast<float>(sent.value);
}

void pack(bulk::Ops& ops, const bulk::Buffer& x, const bulk::Buffer& idx, float scale,
          int index_bits, bulk::Buffer& packed, bulk::Buffer& values) {
  ops.resize(packed, bulk::Elem::U32, idx.size() + 1);
  ops.resize(values, bulk::Elem::F32, idx.size());
  ops.run_pass(std::make_shared<PackPass>(scale, index_bits), {&x, &idx, &packed, &values});
}

void unpack(bulk::Ops& ops, const bulk::Buffer& words, int64_t offset, int64_t count,
            int index_bits, bulk::Buffer& idx, bulk::Buffer& values) {
  ST_CHECK(count >= 1 && offset >= 0 && offset + count <= words.size(), "vgc: ", count,
           " words from ", offset, " of a message of ", words.size());
  ops.resize(idx, bulk::Elem::I32, count - 1);
  ops.resize(values, bulk::Elem::F32, count - 1);
  ops.run_pass(std::make_shared<UnpackPass>(offset, count, index_bits), {&words, &idx, &values});
}

}  // namespace vgc

std::vector<SpKey> Vgc::keys() {
  return {real(kAlpha, 1.5, "(0, inf)", "send when r^2 > alpha v (the paper: 1 to 2)"),
          real(kZeta, 0.999, "(0, 1]", "decay of unsent variance"),
          real(kTau, 0, "[0, inf)", "optional threshold on |r| (0 = off)"),
          whole(kBatch, 32, "[1, inf)", "B when the layers give no per-sample sums")};
}

Vgc::Vgc(const SpValues& v)
    : alpha_(v.get(kAlpha)), zeta_(v.get(kZeta)), tau_(v.get(kTau)), batch_(v.get_int(kBatch)) {}

Vgc::Vgc(const SparsifierOptions& o) : Vgc(SpValues(kName, keys(), o.params)) {}

int Vgc::index_bits(int64_t n) {
  int b = 1;
  while ((int64_t{1} << b) < n) ++b;
  return b;
}

void Vgc::select_on(bulk::Ops& ops, const SelectContext& ctx, const bulk::Buffer& x,
                    DeviceSelection& out) {
  const int64_t n = x.size();
  ST_CHECK(n <= (int64_t{1} << 29), "vgc: bucket of ", n,
           " elements exceeds the 2^29 its 32-bit (index, value) words can address; use a "
           "smaller --bucket-cap-mb");
  ST_CHECK(ctx.aux_buffer || ctx.grad_buffer,
           "vgc: neither per-sample squared-gradient sums nor the raw gradient given");
  DeviceState& v = v_[ctx.bucket];
  v.bind(ops, n);
  // v += s / B^2, the send test, reset / decay; indices ascending.
  const float scale =
      vgc::test(ops, x, ctx.aux_buffer, ctx.aux_buffer ? nullptr : ctx.grad_buffer,
                1.0f / static_cast<float>(batch_), static_cast<float>(alpha_),
                static_cast<float>(zeta_), static_cast<float>(tau_), v.buf(), out.indices);
  if (out.indices.empty()) {
    ops.resize(out.values, bulk::Elem::F32, 0);
    ops.resize(out.packed, bulk::Elem::U32, 0);
    return;
  }
  vgc::pack(ops, x, out.indices, scale, index_bits(n), out.packed, out.values);
  out.threshold = scale;
}

void Vgc::unpack_on(bulk::Ops& ops, const SelectContext&, int64_t n, const bulk::Buffer& words,
                    int64_t offset, int64_t count, DeviceSelection& out) const {
  if (count == 0) {
    ops.resize(out.indices, bulk::Elem::I32, 0);
    ops.resize(out.values, bulk::Elem::F32, 0);
    return;
  }
  vgc::unpack(ops, words, offset, count, index_bits(n), out.indices, out.values);
}

void Vgc::save_state(StateWriter& out) const {
  out.put_buckets(v_, [](StateWriter& w, const DeviceState& v) { v.save(w); });
}

void Vgc::load_state(StateReader& in) {
  in.get_buckets(v_, [](StateReader& r, DeviceState& v) { v.load(r); });
}

}  // namespace st
