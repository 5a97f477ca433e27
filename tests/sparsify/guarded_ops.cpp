#include "tests/sparsify/guarded_ops.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace st::test {

namespace {
// A quiet NaN with a recognisable payload, and a large negative index.
constexpr uint32_t kPoisonF32 = 0x7FC0DEADu;
constexpr uint32_t kPoisonI32 = 0xDEADBEEFu;
}  // namespace

void GuardedOps::poison(Tensor& t) {
  const uint32_t word = t.dtype() == DType::F32 ? kPoisonF32 : kPoisonI32;
  auto* p = static_cast<uint32_t*>(t.raw());
  std::fill(p, p + t.numel(), word);
}

GuardedOps::Alloc* GuardedOps::find(const Buffer& b) {
  const Tensor& t = storage(b);
  if (!t.defined()) return nullptr;
  const auto addr = reinterpret_cast<uintptr_t>(t.raw());
  auto it = allocs_.upper_bound(addr);
  if (it != allocs_.begin()) {
    --it;
    if (addr < it->first + it->second.base.nbytes()) return &it->second;
  }
  // First sight: a buffer CpuOps just allocated. Its memory holds the truth right now.
  Alloc& a = allocs_[addr];
  a.base = t;
  a.shadow.resize(t.nbytes());
  std::memcpy(a.shadow.data(), t.raw(), t.nbytes());
  return &a;
}

void GuardedOps::restore(Alloc* a) {
  if (!a || std::find(restored_.begin(), restored_.end(), a) != restored_.end()) return;
  std::memcpy(a->base.raw(), a->shadow.data(), a->shadow.size());
  restored_.push_back(a);
}

GuardedOps::Scope::Scope(GuardedOps& g, std::initializer_list<const Buffer*> bufs)
    : g_(g), bufs_(bufs) {
  if (g_.depth_++ == 0) ++g_.calls_;
  for (const Buffer* b : bufs_)
    if (b) g_.restore(g_.find(*b));
}

GuardedOps::Scope::~Scope() {
  // The memory the buffers hold now (a call may have given `out` new memory) joins the
  // call's; the outermost scope saves each allocation once, then poisons it.
  for (const Buffer* b : bufs_)
    if (Alloc* a = b ? g_.find(*b) : nullptr;
        a && std::find(g_.restored_.begin(), g_.restored_.end(), a) == g_.restored_.end())
      g_.restored_.push_back(a);
  if (--g_.depth_ > 0) return;
  for (Alloc* a : g_.restored_) {
    std::memcpy(a->shadow.data(), a->base.raw(), a->shadow.size());
    poison(a->base);
  }
  g_.restored_.clear();
}

void* GuardedOps::memory(const Buffer& b) {
  ST_CHECK(depth_ > 0,
           "GuardedOps: a bulk::Ops call without an override in tests/sparsify/guarded_ops.* "
           "reached buffer memory; add one (a Scope around the CpuOps call)");
  restore(find(b));  // a buffer the call reaches through a pointer argument
  return CpuOps::memory(b);
}

void GuardedOps::resize(Buffer& b, Elem e, int64_t n) {
  Scope s(*this, {&b});
  CpuOps::resize(b, e, n);
}

// The bucket tensor's contents move into a buffer of the guard's own; the tensor itself
// is poisoned until release(), so nothing can read it behind the interface meanwhile.
bulk::Buffer GuardedOps::wrap(Tensor& t) {
  ST_CHECK(t.device().is_cpu() && t.dtype() == DType::F32, "GuardedOps::wrap: got ", t.str());
  Buffer b;
  CpuOps::resize(b, Elem::F32, t.numel());
  Alloc* a = find(b);
  std::memcpy(a->shadow.data(), t.raw(), t.nbytes());
  a->wrapped = t;
  poison(a->base);
  poison(t);
  return b;
}

void GuardedOps::release(Buffer& wrapped) {
  Alloc* a = find(wrapped);
  ST_CHECK(a != nullptr && a->wrapped.defined(), "GuardedOps::release: not a wrapped buffer");
  std::memcpy(a->wrapped.raw(), a->shadow.data(), a->wrapped.nbytes());
  allocs_.erase(reinterpret_cast<uintptr_t>(a->base.raw()));
  wrapped = Buffer();
}

void GuardedOps::upload(const void* host, Elem e, int64_t n, Buffer& out) {
  Scope s(*this, {&out});
  CpuOps::upload(host, e, n, out);
}

void GuardedOps::download(const Buffer& b, int64_t begin, int64_t n, void* host) {
  Scope s(*this, {&b});
  CpuOps::download(b, begin, n, host);
}

void GuardedOps::copy(const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin,
                      int64_t n) {
  Scope s(*this, {&src, &dst});
  CpuOps::copy(src, src_begin, dst, dst_begin, n);
}

void GuardedOps::fill(Buffer& b, Range r, float v) {
  Scope s(*this, {&b});
  CpuOps::fill(b, r, v);
}

void GuardedOps::iota(Buffer& out, int64_t n, int32_t start) {
  Scope s(*this, {&out});
  CpuOps::iota(out, n, start);
}

void GuardedOps::axpy(float a, const Buffer& x, Range r, Buffer& y) {
  Scope s(*this, {&x, &y});
  CpuOps::axpy(a, x, r, y);
}

void GuardedOps::scale(Buffer& y, Range r, float a) {
  Scope s(*this, {&y});
  CpuOps::scale(y, r, a);
}

bulk::Stats GuardedOps::stats(const Buffer& x, Range r) {
  Scope s(*this, {&x});
  return CpuOps::stats(x, r);
}

int64_t GuardedOps::count_abs(const Buffer& x, Range r, float tau, bool strict) {
  Scope s(*this, {&x});
  return CpuOps::count_abs(x, r, tau, strict);
}

void GuardedOps::select_abs(const Buffer& x, Range r, float tau, bool strict, Buffer& out) {
  Scope s(*this, {&x, &out});
  CpuOps::select_abs(x, r, tau, strict, out);
}

void GuardedOps::threshold_select(const Buffer& x, Range owned, float tau, int64_t t, Buffer& out) {
  Scope s(*this, {&x, &out});
  CpuOps::threshold_select(x, owned, tau, t, out);
}

float GuardedOps::topk_abs(const Buffer& x, Range r, int64_t k, Buffer& out) {
  Scope s(*this, {&x, &out});
  return CpuOps::topk_abs(x, r, k, out);
}

float GuardedOps::topk_abs_among(const Buffer& x, const Buffer& candidates, int64_t k,
                                 Buffer& out) {
  Scope s(*this, {&x, &candidates, &out});
  return CpuOps::topk_abs_among(x, candidates, k, out);
}

void GuardedOps::gather(const Buffer& x, const Buffer& idx, Buffer& out) {
  Scope s(*this, {&x, &idx, &out});
  CpuOps::gather(x, idx, out);
}

void GuardedOps::scatter_add(const Buffer& idx, const Buffer& vals, Buffer& y) {
  Scope s(*this, {&idx, &vals, &y});
  CpuOps::scatter_add(idx, vals, y);
}

void GuardedOps::scatter_scaled(const Buffer& idx, const Buffer& vals, float a, Buffer& y) {
  Scope s(*this, {&idx, &vals, &y});
  CpuOps::scatter_scaled(idx, vals, a, y);
}

void GuardedOps::zero_at(const Buffer& idx, Buffer& y) {
  Scope s(*this, {&idx, &y});
  CpuOps::zero_at(idx, y);
}

void GuardedOps::union_of(const Buffer& all, const std::vector<int64_t>& offsets,
                          const std::vector<int64_t>& counts, int64_t domain, Buffer& out) {
  Scope s(*this, {&all, &out});
  CpuOps::union_of(all, offsets, counts, domain, out);
}

void GuardedOps::allreduce_sum(Communicator& comm, Buffer& b) {
  Scope s(*this, {&b});
  CpuOps::allreduce_sum(comm, b);
}

void GuardedOps::allgatherv(Communicator& comm, const Buffer& in,
                            const std::vector<int64_t>& counts, Buffer& out) {
  Scope s(*this, {&in, &out});
  CpuOps::allgatherv(comm, in, counts, out);
}

void GuardedOps::broadcast(Communicator& comm, Buffer& b, int root) {
  Scope s(*this, {&b});
  CpuOps::broadcast(comm, b, root);
}

// A view: no memory is touched.
bulk::Buffer GuardedOps::slice(const Buffer& b, int64_t begin, int64_t n) {
  return CpuOps::slice(b, begin, n);
}

void GuardedOps::allgather(Communicator& comm, const Buffer& in, Buffer& out) {
  Scope s(*this, {&in, &out});
  CpuOps::allgather(comm, in, out);
}

void GuardedOps::scatter_axpy(float a, const Buffer& idx, const Buffer& vals, Buffer& y) {
  Scope s(*this, {&idx, &vals, &y});
  CpuOps::scatter_axpy(a, idx, vals, y);
}

void GuardedOps::offset_indices(Buffer& idx, int32_t delta) {
  Scope s(*this, {&idx});
  CpuOps::offset_indices(idx, delta);
}

bulk::IndexBounds GuardedOps::index_bounds(const Buffer& idx) {
  Scope s(*this, {&idx});
  return CpuOps::index_bounds(idx);
}

bool GuardedOps::same_bits(const Buffer& a, const Buffer& b) {
  Scope s(*this, {&a, &b});
  return CpuOps::same_bits(a, b);
}

std::vector<int64_t> GuardedOps::segment_counts(const Buffer& idx, int64_t begin, int64_t count,
                                                const std::vector<int64_t>& segments) {
  Scope s(*this, {&idx});
  return CpuOps::segment_counts(idx, begin, count, segments);
}

// --- The method sections' passes ---

sidco::Moments GuardedOps::exceed_moments(const Buffer& x, part::Range r, float tau,
                                          double log_scale) {
  Scope s(*this, {&x});
  return CpuOps::exceed_moments(x, r, tau, log_scale);
}

sidco::Moments GuardedOps::exceed_compact(const Buffer& x, part::Range r, float tau,
                                          const Buffer* pos, Buffer& out_idx, Buffer& out_vals) {
  Scope s(*this, {&x, pos, &out_idx, &out_vals});
  return CpuOps::exceed_compact(x, r, tau, pos, out_idx, out_vals);
}

void GuardedOps::dgc_momentum(float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen) {
  Scope s(*this, {&x, &u, &v, &seen});
  CpuOps::dgc_momentum(m, x, u, v, seen);
}

float GuardedOps::vgc_test(const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch,
                           float alpha, float zeta, float tau, Buffer& v, Buffer& out) {
  Scope s(*this, {&x, aux, grad, &v, &out});
  return CpuOps::vgc_test(x, aux, grad, inv_batch, alpha, zeta, tau, v, out);
}

void GuardedOps::vgc_pack(const Buffer& x, const Buffer& idx, float scale, int index_bits,
                          Buffer& packed, Buffer& values) {
  Scope s(*this, {&x, &idx, &packed, &values});
  CpuOps::vgc_pack(x, idx, scale, index_bits, packed, values);
}

void GuardedOps::vgc_unpack(const Buffer& words, int64_t offset, int64_t count, int index_bits,
                            Buffer& idx, Buffer& values) {
  Scope s(*this, {&words, &idx, &values});
  CpuOps::vgc_unpack(words, offset, count, index_bits, idx, values);
}

void GuardedOps::quantize(const bulk::QuantSpec& q, const Buffer& x, Buffer& scales, Buffer& codes,
                          Buffer& values) {
  Scope s(*this, {&x, &scales, &codes, &values});
  CpuOps::quantize(q, x, scales, codes, values);
}

void GuardedOps::dequantize(const bulk::QuantSpec& q, const Buffer& codes, const Buffer& words,
                            int64_t scales_at, Buffer& values) {
  Scope s(*this, {&codes, &words, &values});
  CpuOps::dequantize(q, codes, words, scales_at, values);
}

void GuardedOps::pack_bits(const Buffer& codes, int bits, Buffer& words, int64_t at) {
  Scope s(*this, {&codes, &words});
  CpuOps::pack_bits(codes, bits, words, at);
}

void GuardedOps::unpack_bits(const Buffer& words, int64_t at, int64_t count, int bits,
                             Buffer& codes) {
  Scope s(*this, {&words, &codes});
  CpuOps::unpack_bits(words, at, count, bits, codes);
}

void GuardedOps::range_float_quantize(const quant::RangeFloat& f, const Buffer& x, Buffer& codes,
                                      Buffer& values) {
  Scope s(*this, {&x, &codes, &values});
  CpuOps::range_float_quantize(f, x, codes, values);
}

void GuardedOps::range_float_dequantize(const quant::RangeFloat& f, const Buffer& codes,
                                        Buffer& values) {
  Scope s(*this, {&codes, &values});
  CpuOps::range_float_dequantize(f, codes, values);
}

float GuardedOps::abs_min_nonzero(const Buffer& x, Range r) {
  Scope s(*this, {&x});
  return CpuOps::abs_min_nonzero(x, r);
}

void GuardedOps::rfft(const Buffer& x, const std::vector<bulk::FftPiece>& pieces, Buffer& coef) {
  Scope s(*this, {&x, &coef});
  CpuOps::rfft(x, pieces, coef);
}

void GuardedOps::irfft(const Buffer& coef, const std::vector<bulk::FftPiece>& pieces, Buffer& out) {
  Scope s(*this, {&coef, &out});
  CpuOps::irfft(coef, pieces, out);
}

void GuardedOps::sq_magnitudes(const Buffer& coef, Buffer& mag) {
  Scope s(*this, {&coef, &mag});
  CpuOps::sq_magnitudes(coef, mag);
}

float GuardedOps::topk_abs_ranges(const Buffer& x, const std::vector<bulk::TopkRange>& ranges,
                                  Buffer& out) {
  Scope s(*this, {&x, &out});
  return CpuOps::topk_abs_ranges(x, ranges, out);
}

void GuardedOps::pair_indices(const Buffer& idx, Buffer& out) {
  Scope s(*this, {&idx, &out});
  CpuOps::pair_indices(idx, out);
}

void GuardedOps::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const Buffer& A, int64_t a_off, const Buffer& B, int64_t b_off, float beta,
                      Buffer& C, int64_t c_off) {
  Scope s(*this, {&A, &B, &C});
  CpuOps::gemm(trans_a, trans_b, m, n, k, alpha, A, a_off, B, b_off, beta, C, c_off);
}

}  // namespace st::test
