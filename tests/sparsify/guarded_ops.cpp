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

GuardedOps::Scope::Scope(GuardedOps& g, std::initializer_list<const Buffer*> bufs)
    : g_(g), bufs_(bufs) {
  ++g_.calls_;
  for (const Buffer* b : bufs_) {
    Alloc* a = g_.find(*b);
    if (!a || std::find(restored_.begin(), restored_.end(), a) != restored_.end()) continue;
    std::memcpy(a->base.raw(), a->shadow.data(), a->shadow.size());
    restored_.push_back(a);
  }
}

GuardedOps::Scope::~Scope() {
  // The allocations restored before the call plus those the buffers hold now (a call may
  // have given `out` new memory): each saved once, then poisoned.
  std::vector<Alloc*> all = restored_;
  for (const Buffer* b : bufs_)
    if (Alloc* a = g_.find(*b); a && std::find(all.begin(), all.end(), a) == all.end())
      all.push_back(a);
  for (Alloc* a : all) {
    std::memcpy(a->shadow.data(), a->base.raw(), a->shadow.size());
    poison(a->base);
  }
}

void GuardedOps::resize(Buffer& b, Elem e, int64_t n) {
  Scope s(*this, {&b});
  inner_.resize(b, e, n);
}

// The bucket tensor's contents move into a buffer of the guard's own; the tensor itself
// is poisoned until release(), so nothing can read it behind the interface meanwhile.
bulk::Buffer GuardedOps::wrap(Tensor& t) {
  ST_CHECK(t.device().is_cpu() && t.dtype() == DType::F32, "GuardedOps::wrap: got ", t.str());
  Buffer b;
  inner_.resize(b, Elem::F32, t.numel());
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
  inner_.upload(host, e, n, out);
}

void GuardedOps::download(const Buffer& b, int64_t begin, int64_t n, void* host) {
  Scope s(*this, {&b});
  inner_.download(b, begin, n, host);
}

void GuardedOps::copy(const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin,
                      int64_t n) {
  Scope s(*this, {&src, &dst});
  inner_.copy(src, src_begin, dst, dst_begin, n);
}

void GuardedOps::fill(Buffer& b, Range r, float v) {
  Scope s(*this, {&b});
  inner_.fill(b, r, v);
}

void GuardedOps::iota(Buffer& out, int64_t n, int32_t start) {
  Scope s(*this, {&out});
  inner_.iota(out, n, start);
}

void GuardedOps::axpy(float a, const Buffer& x, Range r, Buffer& y) {
  Scope s(*this, {&x, &y});
  inner_.axpy(a, x, r, y);
}

void GuardedOps::scale(Buffer& y, Range r, float a) {
  Scope s(*this, {&y});
  inner_.scale(y, r, a);
}

bulk::Stats GuardedOps::stats(const Buffer& x, Range r) {
  Scope s(*this, {&x});
  return inner_.stats(x, r);
}

int64_t GuardedOps::count_abs(const Buffer& x, Range r, float tau, bool strict) {
  Scope s(*this, {&x});
  return inner_.count_abs(x, r, tau, strict);
}

void GuardedOps::select_abs(const Buffer& x, Range r, float tau, bool strict, Buffer& out) {
  Scope s(*this, {&x, &out});
  inner_.select_abs(x, r, tau, strict, out);
}

void GuardedOps::threshold_select(const Buffer& x, Range owned, float tau, int64_t t, Buffer& out) {
  Scope s(*this, {&x, &out});
  inner_.threshold_select(x, owned, tau, t, out);
}

float GuardedOps::topk_abs(const Buffer& x, Range r, int64_t k, Buffer& out) {
  Scope s(*this, {&x, &out});
  return inner_.topk_abs(x, r, k, out);
}

float GuardedOps::topk_abs_among(const Buffer& x, const Buffer& candidates, int64_t k,
                                 Buffer& out) {
  Scope s(*this, {&x, &candidates, &out});
  return inner_.topk_abs_among(x, candidates, k, out);
}

void GuardedOps::gather(const Buffer& x, const Buffer& idx, Buffer& out) {
  Scope s(*this, {&x, &idx, &out});
  inner_.gather(x, idx, out);
}

void GuardedOps::scatter_add(const Buffer& idx, const Buffer& vals, Buffer& y) {
  Scope s(*this, {&idx, &vals, &y});
  inner_.scatter_add(idx, vals, y);
}

void GuardedOps::scatter_scaled(const Buffer& idx, const Buffer& vals, float a, Buffer& y) {
  Scope s(*this, {&idx, &vals, &y});
  inner_.scatter_scaled(idx, vals, a, y);
}

void GuardedOps::zero_at(const Buffer& idx, Buffer& y) {
  Scope s(*this, {&idx, &y});
  inner_.zero_at(idx, y);
}

void GuardedOps::union_of(const Buffer& all, const std::vector<int64_t>& offsets,
                          const std::vector<int64_t>& counts, int64_t domain, Buffer& out) {
  Scope s(*this, {&all, &out});
  inner_.union_of(all, offsets, counts, domain, out);
}

void GuardedOps::allreduce_sum(Communicator& comm, Buffer& b) {
  Scope s(*this, {&b});
  inner_.allreduce_sum(comm, b);
}

void GuardedOps::allgatherv(Communicator& comm, const Buffer& in,
                            const std::vector<int64_t>& counts, Buffer& out) {
  Scope s(*this, {&in, &out});
  inner_.allgatherv(comm, in, counts, out);
}

void GuardedOps::broadcast(Communicator& comm, Buffer& b, int root) {
  Scope s(*this, {&b});
  inner_.broadcast(comm, b, root);
}

// A view: no memory is touched.
bulk::Buffer GuardedOps::slice(const Buffer& b, int64_t begin, int64_t n) {
  return inner_.slice(b, begin, n);
}

void GuardedOps::allgather(Communicator& comm, const Buffer& in, Buffer& out) {
  Scope s(*this, {&in, &out});
  inner_.allgather(comm, in, out);
}

void GuardedOps::scatter_axpy(float a, const Buffer& idx, const Buffer& vals, Buffer& y) {
  Scope s(*this, {&idx, &vals, &y});
  inner_.scatter_axpy(a, idx, vals, y);
}

void GuardedOps::offset_indices(Buffer& idx, int32_t delta) {
  Scope s(*this, {&idx});
  inner_.offset_indices(idx, delta);
}

bulk::IndexBounds GuardedOps::index_bounds(const Buffer& idx) {
  Scope s(*this, {&idx});
  return inner_.index_bounds(idx);
}

bool GuardedOps::same_bits(const Buffer& a, const Buffer& b) {
  Scope s(*this, {&a, &b});
  return inner_.same_bits(a, b);
}

std::vector<int64_t> GuardedOps::segment_counts(const Buffer& idx, int64_t begin, int64_t count,
                                                const std::vector<int64_t>& segments) {
  Scope s(*this, {&idx});
  return inner_.segment_counts(idx, begin, count, segments);
}

}  // namespace st::test
