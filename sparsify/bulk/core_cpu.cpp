#include "sparsify/bulk/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/communicator.h"
#include "core/error.h"
#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cpu_common.h"
#include "sparsify/kernels/select_cpu.h"
#include "sparsify/kernels/threshold_select_cpu.h"

namespace st::bulk {

namespace {

using cpu_detail::kParallelMin;
using cpu_detail::kSumBlock;

DType dtype_for(Elem e) {
  return e == Elem::F32 ? DType::F32 : DType::I32;
}

}  // namespace

void* CpuOps::memory(const Buffer& b) {
  return storage(b).defined() ? storage(b).raw() : nullptr;
}

void CpuOps::on_comm_tensors(Communicator&, const std::vector<Tensor*>&,
                             const std::vector<Tensor*>&, const std::function<void()>& op) {
  op();
}

Tensor CpuOps::view(const Buffer& b) {
  const Tensor& t = storage(b);
  return t.numel() == b.size() ? t : t.slice_flat(0, {b.size()});
}

void CpuOps::put_indices(const std::vector<int32_t>& v, Buffer& out) {
  const auto n = static_cast<int64_t>(v.size());
  resize(out, Elem::I32, n);
  if (n > 0) std::memcpy(i32(out), v.data(), 4 * static_cast<size_t>(n));
}

// --- Memory ---

// Calls complete as they return: nothing to wait for.
void CpuOps::finish() {}

void CpuOps::resize(Buffer& b, Elem e, int64_t n) {
  ST_CHECK(n >= 0, "bulk::Ops::resize: negative size ", n);
  const Tensor& t = storage(b);
  const bool fits = t.defined() && t.dtype() == dtype_for(e) && t.numel() >= n;
  if (!fits) {
    // Grow by half again, so selections whose count drifts up do not reallocate each step.
    const int64_t old = t.defined() ? t.numel() : 0;
    const int64_t cap = std::max<int64_t>({n, old + old / 2, 16});
    set_storage(b, Tensor::empty({cap}, dtype_for(e), device()));
  }
  set_size(b, e, n);
}

Buffer CpuOps::wrap(Tensor& t) {
  ST_CHECK(t.device() == device() && t.dtype() == DType::F32, "bulk::", name(),
           "::wrap: expected a float32 tensor on ", device().str(), ", got ", t.str());
  Buffer b;
  set_storage(b, t.reshape({t.numel()}));
  set_size(b, Elem::F32, t.numel());
  return b;
}

void CpuOps::release(Buffer& wrapped) {
  wrapped = Buffer();
}

void CpuOps::upload(const void* host, Elem e, int64_t n, Buffer& out) {
  resize(out, e, n);
  if (n > 0) std::memcpy(memory(out), host, 4 * static_cast<size_t>(n));
}

void CpuOps::download(const Buffer& b, int64_t begin, int64_t n, void* host) {
  ST_CHECK(begin >= 0 && n >= 0 && begin + n <= b.size(), "bulk::Ops::download: [", begin, ", ",
           begin + n, ") outside a buffer of ", b.size(), " elements");
  if (n > 0)
    std::memcpy(host, static_cast<const char*>(memory(b)) + 4 * begin, 4 * static_cast<size_t>(n));
}

void CpuOps::copy(const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin, int64_t n) {
  ST_CHECK(src_begin >= 0 && dst_begin >= 0 && n >= 0 && src_begin + n <= src.size() &&
               dst_begin + n <= dst.size(),
           "bulk::Ops::copy: ", n, " elements from ", src_begin, " of ", src.size(), " to ",
           dst_begin, " of ", dst.size());
  if (n > 0)
    std::memmove(static_cast<char*>(memory(dst)) + 4 * dst_begin,
                 static_cast<const char*>(memory(src)) + 4 * src_begin, 4 * static_cast<size_t>(n));
}

void CpuOps::fill(Buffer& b, part::Range r, float v) {
  check::range("fill", b.size(), r);
  float* p = f32(b);
  if (r.size() <= 0) return;
  // Zeroing a bucket is memset's job: it streams large buffers without reading them first.
  if (v == 0.0f && !std::signbit(v)) {
    std::memset(p + r.begin, 0, 4 * static_cast<size_t>(r.size()));
  } else {
    std::fill(p + r.begin, p + r.end, v);
  }
}

void CpuOps::iota(Buffer& out, int64_t n, int32_t start) {
  resize(out, Elem::I32, n);
  int32_t* p = i32(out);
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = start + static_cast<int32_t>(i);
}

// --- Element-wise ---

void CpuOps::axpy(float a, const Buffer& x, part::Range r, Buffer& y) {
  check::range("axpy", x.size(), r);
  check::range("axpy", y.size(), r);
  const float* xp = f32(x);
  float* yp = f32(y);
  const int64_t b = r.begin, e = r.end;
  if (a == 1.0f) {  // error feedback, x += g: the loop the hook always ran
#pragma omp parallel for simd if (e - b > kParallelMin) schedule(static)
    for (int64_t i = b; i < e; ++i) yp[i] += xp[i];
  } else {
#pragma omp parallel for simd if (e - b > kParallelMin) schedule(static)
    for (int64_t i = b; i < e; ++i) yp[i] += a * xp[i];
  }
}

void CpuOps::scale(Buffer& y, part::Range r, float a) {
  check::range("scale", y.size(), r);
  float* p = f32(y);
  const int64_t b = r.begin, e = r.end;
#pragma omp parallel for simd if (e - b > kParallelMin) schedule(static)
  for (int64_t i = b; i < e; ++i) p[i] *= a;
}

// --- Statistics ---

Stats CpuOps::stats(const Buffer& x, part::Range r) {
  check::range("stats", x.size(), r);
  Stats s;
  s.count = r.size();
  if (r.size() <= 0) return s;
  const float* p = f32(x) + r.begin;
  const int64_t n = r.size(), blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> sum(blocks), sq(blocks), asum(blocks);
  std::vector<float> amax(blocks);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double s1 = 0, s2 = 0, sa = 0;
    float mx = 0;
    const int64_t end = std::min(n, (blk + 1) * kSumBlock);
#pragma omp simd reduction(+ : s1, s2, sa) reduction(max : mx)
    for (int64_t i = blk * kSumBlock; i < end; ++i) {
      const double v = p[i];
      const float a = std::fabs(p[i]);
      s1 += v;
      s2 += v * v;
      sa += a;
      mx = std::max(mx, a);
    }
    sum[blk] = s1;
    sq[blk] = s2;
    asum[blk] = sa;
    amax[blk] = mx;
  }
  for (int64_t blk = 0; blk < blocks; ++blk) {
    s.sum += sum[blk];
    s.sum_sq += sq[blk];
    s.abs_sum += asum[blk];
    s.abs_max = std::max(s.abs_max, amax[blk]);
  }
  return s;
}

// --- Selection ---

void CpuOps::select_abs(const Buffer& x, part::Range r, float tau, bool strict, Buffer& out) {
  check::range("select_abs", x.size(), r);
  select::abs_threshold(f32(x), r.begin, r.end, tau, strict, scratch_);
  put_indices(scratch_, out);
}

float CpuOps::topk_abs(const Buffer& x, part::Range r, int64_t k, Buffer& out) {
  check::range("topk_abs", x.size(), r);
  const float tau = select::topk_abs(f32(x) + r.begin, r.size(), k, scratch_);
  put_indices(scratch_, out);
  if (r.begin != 0) offset_indices(out, static_cast<int32_t>(r.begin));
  return tau;
}

// --- Gather / scatter: in index order, as the exchange loops always ran ---

void CpuOps::gather(const Buffer& x, const Buffer& idx, Buffer& out) {
  const int64_t m = idx.size();
  resize(out, Elem::F32, m);
  const float* xp = f32(x);
  const int32_t* ip = i32(idx);
  float* o = f32(out);
  for (int64_t j = 0; j < m; ++j) o[j] = xp[ip[j]];
}

void CpuOps::scatter_scaled(const Buffer& idx, const Buffer& vals, float a, Buffer& y) {
  ST_CHECK(vals.size() >= idx.size(), "bulk::Ops::scatter_scaled: ", idx.size(), " positions but ",
           vals.size(), " values");
  const int32_t* ip = i32(idx);
  const float* v = f32(vals);
  float* yp = f32(y);
  for (int64_t j = 0; j < idx.size(); ++j) yp[ip[j]] = v[j] * a;
}

void CpuOps::zero_at(const Buffer& idx, Buffer& y) {
  const int32_t* ip = i32(idx);
  float* yp = f32(y);
  for (int64_t j = 0; j < idx.size(); ++j) yp[ip[j]] = 0.0f;
}

void CpuOps::run_pass(const PassPtr& p, const PassBuffers& b) {
  ST_CHECK(p != nullptr, "bulk::Ops::run_pass: no pass given");
  p->on_host(pass_memory(b, [this](const Buffer& x) { return memory(x); }));
}

PassResult CpuOps::run_pass_waiting(const PassPtr& p, const PassBuffers& b) {
  ST_CHECK(p != nullptr, "bulk::Ops::run_pass_waiting: no pass given");
  return p->on_host(pass_memory(b, [this](const Buffer& x) { return memory(x); }));
}

// First appearance in rank order, marked in a flag array that is cleared again
// afterwards, so the pass costs the entries, not the domain.
void CpuOps::union_of(const Buffer& all, const std::vector<int64_t>& offsets,
                      const std::vector<int64_t>& counts, int64_t domain, Buffer& out) {
  if (static_cast<int64_t>(marker_.size()) < domain) marker_.assign(domain, 0);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  resize(out, Elem::I32, total);  // at most every entry; shrunk to the distinct ones below
  const int32_t* a = i32(all);
  int32_t* o = i32(out);
  int64_t u = 0;
  for (size_t r = 0; r < counts.size(); ++r)
    for (int64_t j = 0; j < counts[r]; ++j) {
      const int32_t i = a[offsets[r] + j];
      if (!marker_[i]) {
        marker_[i] = 1;
        o[u++] = i;
      }
    }
  for (int64_t j = 0; j < u; ++j) marker_[o[j]] = 0;
  resize(out, Elem::I32, u);
}

// --- Collectives: the communicator moves the buffers' memory in place. Every rank
// passes the same sizes, so skipping empty ones is the same choice on every rank. ---

void CpuOps::allreduce_sum(Communicator& comm, Buffer& b) {
  if (b.empty()) return;
  Tensor t = view(b);
  on_comm_tensors(comm, {}, {&t}, [&] { comm.allreduce(t); });
}

void CpuOps::allgatherv(Communicator& comm, const Buffer& in, const std::vector<int64_t>& counts,
                        Buffer& out) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  ST_CHECK(static_cast<int64_t>(counts.size()) == comm.size() &&
               counts[static_cast<size_t>(comm.rank())] == in.size(),
           "bulk::Ops::allgatherv: rank ", comm.rank(), " sends ", in.size(),
           " elements but its count says otherwise");
  resize(out, in.elem(), total);
  if (total == 0) return;
  Tensor src = in.empty() ? Tensor::empty({0}, dtype_for(in.elem()), device()) : view(in);
  Tensor dst = view(out);
  on_comm_tensors(comm, {&src}, {&dst}, [&] { comm.allgatherv(src, dst, counts); });
}

void CpuOps::broadcast(Communicator& comm, Buffer& b, int root) {
  if (b.empty()) return;
  Tensor t = view(b);
  // The root's values travel, so a staged copy must hold them too: an output.
  on_comm_tensors(comm, {}, {&t}, [&] { comm.broadcast(t, root); });
}

Buffer CpuOps::slice(const Buffer& b, int64_t begin, int64_t n) {
  ST_CHECK(begin >= 0 && n >= 0 && begin + n <= b.size(), "bulk::Ops::slice: [", begin, ", ",
           begin + n, ") outside a buffer of ", b.size(), " elements");
  Buffer s;
  if (n > 0) set_storage(s, storage(b).slice_flat(begin, {n}));
  set_size(s, b.elem(), n);
  return s;
}

// --- Exchange extras ---

void CpuOps::allgather(Communicator& comm, const Buffer& in, Buffer& out) {
  resize(out, in.elem(), in.size() * comm.size());
  if (in.empty()) return;
  Tensor src = view(in);
  Tensor dst = view(out);
  on_comm_tensors(comm, {&src}, {&dst}, [&] { comm.allgather(src, dst); });
}

void CpuOps::scatter_axpy(float a, const Buffer& idx, const Buffer& vals, Buffer& y) {
  ST_CHECK(vals.size() >= idx.size(), "bulk::Ops::scatter_axpy: ", idx.size(), " positions but ",
           vals.size(), " values");
  const int32_t* ip = i32(idx);
  const float* v = f32(vals);
  float* yp = f32(y);
  if (a == 1.0f) {
    for (int64_t j = 0; j < idx.size(); ++j) yp[ip[j]] += v[j];
  } else {
    for (int64_t j = 0; j < idx.size(); ++j) yp[ip[j]] += a * v[j];
  }
}

IndexBounds CpuOps::index_bounds(const Buffer& idx) {
  IndexBounds b;
  if (idx.empty()) return b;
  const int32_t* p = i32(idx);
  const auto [lo, hi] = std::minmax_element(p, p + idx.size());
  b.min = *lo;
  b.max = *hi;
  return b;
}

}  // namespace st::bulk
