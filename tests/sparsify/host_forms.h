// Sparsifiers driven from host vectors in tests: select_on, unpack_on,
// decode_on and second_message_on through this thread's CPU implementation of bulk::Ops
// (one long-lived instance, so rule state that remembers its Ops stays valid between
// calls), results copied back to plain vectors.
#pragma once

#include <cstdint>
#include <vector>

#include "sparsify/device_state.h"
#include "sparsify/host_select.h"
#include "sparsify/sidco_fit.h"
#include "sparsify/sparsifier.h"

namespace st::test {

template <class T>
std::vector<T> host_of(const bulk::Buffer& b) {
  std::vector<T> v(static_cast<size_t>(b.size()));
  thread_cpu_ops().download(b, 0, b.size(), v.data());
  return v;
}

inline bulk::Buffer buffer_of(const float* x, int64_t n) {
  bulk::Buffer b;
  thread_cpu_ops().upload(x, bulk::Elem::F32, n, b);
  return b;
}

// SIDCo's estimate and selection on host memory, through this thread's CPU implementation.
inline sidco::Estimate sidco_estimate(const float* x, int64_t n, sidco::Variant v, int stages,
                                      double delta, sidco::Workspace& ws) {
  return sidco::estimate(thread_cpu_ops(), buffer_of(x, n), v, stages, delta, ws);
}
inline void sidco_select_above(const float* x, int64_t n, const sidco::Estimate& e,
                               sidco::Workspace& ws, std::vector<int32_t>& out) {
  bulk::Buffer idx;
  sidco::select_above(thread_cpu_ops(), buffer_of(x, n), e, ws, idx);
  out = host_of<int32_t>(idx);
}

inline Selection host_selection(const DeviceSelection& d) {
  Selection s;
  s.indices = host_of<int32_t>(d.indices);
  s.values = host_of<float>(d.values);
  s.packed = host_of<uint32_t>(d.packed);
  s.threshold = d.threshold;
  return s;
}

// Side inputs as host floats (n each), or null: they become SelectContext's buffers.
struct HostSideInputs {
  const float* grad = nullptr;
  const float* aux = nullptr;
};

// select_on() on x (sparsify/host_select.h).
inline void select_host(Sparsifier& sp, const SelectContext& ctx, const float* x, int64_t n,
                        Selection& out, HostSideInputs side = {}) {
  select_on_host(sp, ctx, x, n, out, side.grad, side.aux);
}

inline void unpack_host(const Sparsifier& sp, const SelectContext& ctx, int64_t n,
                        const std::vector<uint32_t>& words, Selection& out) {
  bulk::Buffer wb;
  thread_cpu_ops().upload(words.data(), bulk::Elem::U32, static_cast<int64_t>(words.size()), wb);
  DeviceSelection d;
  sp.unpack_on(thread_cpu_ops(), ctx, n, wb, 0, wb.size(), d);
  out = host_selection(d);
}

inline std::vector<float> decode_host(Sparsifier& sp, const SelectContext& ctx,
                                      const std::vector<float>& coeffs, int64_t n) {
  bulk::Buffer cb = buffer_of(coeffs.data(), static_cast<int64_t>(coeffs.size())), out;
  sp.decode_on(thread_cpu_ops(), ctx, cb, n, out);
  return host_of<float>(out);
}

inline std::vector<float> second_message_host(Sparsifier& sp, const SelectContext& ctx,
                                              const float* x, int64_t n,
                                              const std::vector<float>& first_sum) {
  bulk::Buffer xb = buffer_of(x, n);
  bulk::Buffer fb = buffer_of(first_sum.data(), static_cast<int64_t>(first_sum.size())), out;
  sp.second_message_on(thread_cpu_ops(), ctx, xb, fb, out);
  return host_of<float>(out);
}

// observe() with the low-rank second message's sum (ExchangeFeedback::summed_buffer).
inline void observe_summed(Sparsifier& sp, ExchangeFeedback fb, const std::vector<float>& sum) {
  const bulk::Buffer b = buffer_of(sum.data(), static_cast<int64_t>(sum.size()));
  fb.summed_buffer = &b;
  fb.summed_size = b.size();
  sp.observe(fb);
}

}  // namespace st::test
