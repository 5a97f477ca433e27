// CudaOps: the core's memory, element-wise passes, gather/scatter and the factory.
// Selection, statistics and unions are in core_select_cuda.cu, collectives in
// core_comm_cuda.cu, each family in its <family>_cuda.cu.
#include "sparsify/bulk/cuda_ops.h"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstring>

#include "sparsify/bulk/arg_checks.h"
#include "sparsify/bulk/cuda_ops_detail.cuh"

namespace st::bulk {

namespace {

using detail::launch;

__global__ void fill_kernel(float* p, float v, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) p[i] = v;
}

__global__ void iota_kernel(int32_t* p, int32_t start, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) p[i] = start + static_cast<int32_t>(i);
}

__global__ void add_kernel(const float* x, float* y, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) y[i] += x[i];
}

// y + a x as one fused multiply-add: the CPU loop is contracted to FMA as well when the
// host has it (-march=native), so both round once.
__global__ void axpy_kernel(float a, const float* x, float* y, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) y[i] = __fmaf_rn(a, x[i], y[i]);
}

__global__ void scale_kernel(float* y, float a, int64_t n) {
  ST_GRID_STRIDE_LOOP(i, n) y[i] = __fmul_rn(y[i], a);
}

__global__ void gather_kernel(const float* x, const int32_t* idx, float* out, int64_t m) {
  ST_GRID_STRIDE_LOOP(j, m) out[j] = x[idx[j]];
}

__global__ void zero_at_kernel(const int32_t* idx, float* y, int64_t m) {
  ST_GRID_STRIDE_LOOP(j, m) y[idx[j]] = 0.0f;
}

// Positions sorted stably (pos ascending, original order j within a run): the thread at
// the head of each run applies the run's values in index order, as the CPU loop does, so
// repeated positions give the same bits. `assign` keeps only the last value (y = a v).
__global__ void scatter_runs_kernel(const int32_t* pos, const int32_t* order, const float* vals,
                                    float a, bool assign, float* y, int64_t m) {
  ST_GRID_STRIDE_LOOP(i, m) {
    const int32_t p = pos[i];
    if (i > 0 && pos[i - 1] == p) continue;
    int64_t end = i + 1;
    while (end < m && pos[end] == p) ++end;
    if (assign) {
      y[p] = __fmul_rn(vals[order[end - 1]], a);
    } else {
      float acc = y[p];
      for (int64_t k = i; k < end; ++k) acc = __fmaf_rn(a, vals[order[k]], acc);
      y[p] = acc;
    }
  }
}

}  // namespace

OpsPtr make_cuda_ops(Device device) {
  return std::make_unique<CudaOps>(device);
}

bool cuda_ops_built() {
  return true;
}

CudaOps::CudaOps(Device device) : device_(device) {
  ST_CHECK(device.is_cuda(), "bulk::CudaOps: ", device.str(), " is not a CUDA device");
  ST_CHECK(device.index < cuda_device_count(), "bulk::CudaOps: no CUDA device ", device.str(), " (",
           cuda_device_count(), " visible)");
}

CudaOps::~CudaOps() {
  if (pinned_) (void)cudaFreeHost(pinned_);  // destructors must not throw
}

float* CudaOps::f32(Buffer& b) {
  return storage(b).defined() ? static_cast<float*>(storage(b).raw()) : nullptr;
}
const float* CudaOps::f32(const Buffer& b) {
  return storage(b).defined() ? static_cast<const float*>(storage(b).raw()) : nullptr;
}
int32_t* CudaOps::i32(Buffer& b) {
  return storage(b).defined() ? static_cast<int32_t*>(storage(b).raw()) : nullptr;
}
const int32_t* CudaOps::i32(const Buffer& b) {
  return storage(b).defined() ? static_cast<const int32_t*>(storage(b).raw()) : nullptr;
}

Tensor CudaOps::view(const Buffer& b) {
  const Tensor& t = storage(b);
  return t.numel() == b.size() ? t : t.slice_flat(0, {b.size()});
}

void* CudaOps::pinned(size_t bytes) {
  if (bytes > pinned_bytes_) {
    if (pinned_) ST_CUDA_CHECK(cudaFreeHost(pinned_));
    pinned_ = nullptr;
    // Doubling: page-locking is slow (a system call per page range), and the downloads a
    // method makes grow with its selection, which drifts from step to step.
    const size_t want = std::max<size_t>({bytes, 2 * pinned_bytes_, 4096});
    pinned_bytes_ = 0;
    ST_CUDA_CHECK(cudaMallocHost(&pinned_, want));
    pinned_bytes_ = want;
  }
  return pinned_;
}

void CudaOps::to_host(const void* device_ptr, size_t bytes, void* host) {
  if (bytes == 0) return;
  cuda::DeviceGuard guard(dev());
  const cudaStream_t s = cuda::current_stream(dev());
  void* stage = pinned(bytes);
  ST_CUDA_CHECK(cudaMemcpyAsync(stage, device_ptr, bytes, cudaMemcpyDeviceToHost, s));
  ST_CUDA_CHECK(cudaStreamSynchronize(s));
  std::memcpy(host, stage, bytes);
}

// --- Memory ---

void CudaOps::resize(Buffer& b, Elem e, int64_t n) {
  ST_CHECK(n >= 0, "bulk::CudaOps::resize: negative size ", n);
  const Tensor& t = storage(b);
  const bool fits = t.defined() && t.dtype() == detail::dtype_for(e) && t.numel() >= n;
  if (!fits) {
    // Grow by half again, so selections whose count drifts up do not reallocate each step.
    const int64_t old = t.defined() ? t.numel() : 0;
    const int64_t cap = std::max<int64_t>({n, old + old / 2, 16});
    set_storage(b, Tensor::empty({cap}, detail::dtype_for(e), device_));
  }
  set_size(b, e, n);
}

Buffer CudaOps::wrap(Tensor& t) {
  ST_CHECK(t.device() == device_ && t.dtype() == DType::F32, "bulk::CudaOps::wrap: expected a ",
           "float32 tensor on ", device_.str(), ", got ", t.str());
  Buffer b;
  set_storage(b, t.reshape({t.numel()}));
  set_size(b, Elem::F32, t.numel());
  return b;
}

void CudaOps::release(Buffer& wrapped) {
  wrapped = Buffer();
}

void CudaOps::finish() {
  cuda::DeviceGuard guard(dev());
  ST_CUDA_CHECK(cudaStreamSynchronize(cuda::current_stream(dev())));
}

void CudaOps::upload(const void* host, Elem e, int64_t n, Buffer& out) {
  resize(out, e, n);
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  // From pageable memory the call returns once the bytes are staged, so `host` may go
  // away right after; the copy itself stays in stream order.
  ST_CUDA_CHECK(cudaMemcpyAsync(storage(out).raw(), host, 4 * static_cast<size_t>(n),
                                cudaMemcpyHostToDevice, cuda::current_stream(dev())));
}

void CudaOps::download(const Buffer& b, int64_t begin, int64_t n, void* host) {
  ST_CHECK(begin >= 0 && n >= 0 && begin + n <= b.size(), "bulk::CudaOps::download: [", begin, ", ",
           begin + n, ") outside a buffer of ", b.size(), " elements");
  if (n > 0)
    to_host(static_cast<const char*>(storage(b).raw()) + 4 * begin, 4 * static_cast<size_t>(n),
            host);
}

void CudaOps::copy(const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin,
                   int64_t n) {
  ST_CHECK(src_begin >= 0 && dst_begin >= 0 && n >= 0 && src_begin + n <= src.size() &&
               dst_begin + n <= dst.size(),
           "bulk::CudaOps::copy: ", n, " elements from ", src_begin, " of ", src.size(), " to ",
           dst_begin, " of ", dst.size());
  if (n == 0) return;
  cuda::DeviceGuard guard(dev());
  const cudaStream_t s = cuda::current_stream(dev());
  const size_t bytes = 4 * static_cast<size_t>(n);
  const char* from = static_cast<const char*>(storage(src).raw()) + 4 * src_begin;
  char* to = static_cast<char*>(storage(dst).raw()) + 4 * dst_begin;
  if (from < to + bytes && to < from + bytes && from != to) {
    // Overlapping ranges (memmove on the CPU): cudaMemcpy does not allow them.
    detail::Scratch tmp(bytes, dev());
    ST_CUDA_CHECK(cudaMemcpyAsync(tmp.at<char>(0), from, bytes, cudaMemcpyDeviceToDevice, s));
    ST_CUDA_CHECK(cudaMemcpyAsync(to, tmp.at<char>(0), bytes, cudaMemcpyDeviceToDevice, s));
  } else if (from != to) {
    ST_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, s));
  }
}

void CudaOps::fill(Buffer& b, part::Range r, float v) {
  check::range("fill", b.size(), r);
  cuda::DeviceGuard guard(dev());
  launch(r.size(), cuda::current_stream(dev()), fill_kernel, f32(b) + r.begin, v);
}

void CudaOps::iota(Buffer& out, int64_t n, int32_t start) {
  resize(out, Elem::I32, n);
  cuda::DeviceGuard guard(dev());
  launch(n, cuda::current_stream(dev()), iota_kernel, i32(out), start);
}

// --- Element-wise ---

void CudaOps::axpy(float a, const Buffer& x, part::Range r, Buffer& y) {
  check::range("axpy", x.size(), r);
  check::range("axpy", y.size(), r);
  cuda::DeviceGuard guard(dev());
  const cudaStream_t s = cuda::current_stream(dev());
  if (a == 1.0f) {  // error feedback, x += g: a plain add, as on the CPU
    launch(r.size(), s, add_kernel, f32(x) + r.begin, f32(y) + r.begin);
  } else {
    launch(r.size(), s, axpy_kernel, a, f32(x) + r.begin, f32(y) + r.begin);
  }
}

void CudaOps::scale(Buffer& y, part::Range r, float a) {
  check::range("scale", y.size(), r);
  cuda::DeviceGuard guard(dev());
  launch(r.size(), cuda::current_stream(dev()), scale_kernel, f32(y) + r.begin, a);
}

// --- Gather / scatter ---

void CudaOps::gather(const Buffer& x, const Buffer& idx, Buffer& out) {
  const int64_t m = idx.size();
  resize(out, Elem::F32, m);
  cuda::DeviceGuard guard(dev());
  launch(m, cuda::current_stream(dev()), gather_kernel, f32(x), i32(idx), f32(out));
}

namespace {

// Sorts (position, j) pairs by position, stably, and runs the scatter over the runs.
void scatter_sorted(const int32_t* idx, const float* vals, int64_t m, float a, bool assign,
                    float* y, int64_t domain, int device) {
  if (m <= 0) return;
  ST_CHECK(m <= INT32_MAX, "bulk::CudaOps: ", m, " positions do not fit int32");
  const cudaStream_t s = cuda::current_stream(device);
  const auto* keys_in = reinterpret_cast<const uint32_t*>(idx);  // positions are >= 0
  const int bits = detail::position_bits(domain);
  size_t sort_bytes = 0;
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, keys_in, static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), m, 0, bits, s));
  const size_t vec = detail::align256(4 * static_cast<size_t>(m));
  detail::Scratch scratch(3 * vec + sort_bytes, device);
  auto* keys_out = scratch.at<uint32_t>(0);
  auto* order_in = scratch.at<int32_t>(vec);
  auto* order_out = scratch.at<int32_t>(2 * vec);
  launch(m, s, iota_kernel, order_in, int32_t{0});
  ST_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.at<void>(3 * vec), sort_bytes, keys_in,
                                                keys_out, order_in, order_out, m, 0, bits, s));
  launch(m, s, scatter_runs_kernel, reinterpret_cast<const int32_t*>(keys_out),
         static_cast<const int32_t*>(order_out), vals, a, assign, y);
}

}  // namespace

void CudaOps::scatter_axpy(float a, const Buffer& idx, const Buffer& vals, Buffer& y) {
  ST_CHECK(vals.size() >= idx.size(), "bulk::CudaOps::scatter_axpy: ", idx.size(),
           " positions but ", vals.size(), " values");
  cuda::DeviceGuard guard(dev());
  scatter_sorted(i32(idx), f32(vals), idx.size(), a, false, f32(y), y.size(), dev());
}

void CudaOps::scatter_scaled(const Buffer& idx, const Buffer& vals, float a, Buffer& y) {
  ST_CHECK(vals.size() >= idx.size(), "bulk::CudaOps::scatter_scaled: ", idx.size(),
           " positions but ", vals.size(), " values");
  cuda::DeviceGuard guard(dev());
  scatter_sorted(i32(idx), f32(vals), idx.size(), a, true, f32(y), y.size(), dev());
}

void CudaOps::zero_at(const Buffer& idx, Buffer& y) {
  cuda::DeviceGuard guard(dev());
  launch(idx.size(), cuda::current_stream(dev()), zero_at_kernel, i32(idx), f32(y));
}

void* CudaOps::device_address(const Buffer& b) {
  return storage(b).raw();
}

void CudaOps::run_pass(const PassPtr& p, const PassBuffers& b) {
  ST_CHECK(p != nullptr, "bulk::Ops::run_pass: no pass given");
  cuda::DeviceGuard guard(dev());
  p->on_cuda(pass_memory(b, device_address));
}

PassResult CudaOps::run_pass_waiting(const PassPtr& p, const PassBuffers& b) {
  ST_CHECK(p != nullptr, "bulk::Ops::run_pass_waiting: no pass given");
  cuda::DeviceGuard guard(dev());
  return p->on_cuda(pass_memory(b, device_address));
}

Buffer CudaOps::slice(const Buffer& b, int64_t begin, int64_t n) {
  ST_CHECK(begin >= 0 && n >= 0 && begin + n <= b.size(), "bulk::CudaOps::slice: [", begin, ", ",
           begin + n, ") outside a buffer of ", b.size(), " elements");
  Buffer s;
  if (n > 0) set_storage(s, storage(b).slice_flat(begin, {n}));
  set_size(s, b.elem(), n);
  return s;
}

}  // namespace st::bulk
