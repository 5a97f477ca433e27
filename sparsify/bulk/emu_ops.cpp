#include "sparsify/bulk/emu_ops.h"

#include <cstring>
#include <optional>
#include <type_traits>

#include "core/emu/stream.h"
#include "core/error.h"
#include "sparsify/bulk/cpu_ops.h"

namespace st::bulk {

namespace {
// True on an executor while it runs a queued call, whose outputs the host sized already.
thread_local bool t_queued_call = false;
}  // namespace

// The CPU kernels on this device's buffers; every call reaches memory through
// CpuOps::memory, i.e. Tensor::raw, which only this device's executors may use.
class EmuOps::Kernels : public CpuOps {
 public:
  explicit Kernels(Device d) : device_(d) {}
  Device device() const override { return device_; }
  const char* name() const override { return "emu"; }
  void resize(Buffer& b, Elem e, int64_t n) override {
    ST_CHECK(!t_queued_call || (b.size() == n && b.elem() == e), "bulk::EmuOps on ", device_.str(),
             ": a queued call resized an output to ", n, " elements that the host had sized to ",
             b.size());
    CpuOps::resize(b, e, n);
  }

 private:
  Device device_;
};

EmuOps::EmuOps(Device device) : device_(device), kernels_(std::make_shared<Kernels>(device)) {
  ST_CHECK(device.is_emu(), "bulk::EmuOps: ", device.str(), " is not an emulated device");
}

EmuOps::~EmuOps() = default;

emu::Stream& EmuOps::stream() const {
  return emu::current_stream(device_.index);
}

Tensor EmuOps::view(const Buffer& b) {
  const Tensor& t = storage(b);
  return t.numel() == b.size() ? t : t.slice_flat(0, {b.size()});
}

void EmuOps::later(std::function<void(Kernels&)> call) {
  stream().enqueue([k = kernels_, call = std::move(call)] {
    t_queued_call = true;
    try {
      call(*k);
    } catch (...) {
      t_queued_call = false;
      throw;
    }
    t_queued_call = false;
  });
}

template <typename Call>
auto EmuOps::now(Call call) -> decltype(call()) {
  using R = decltype(call());
  emu::Stream& s = stream();
  if constexpr (std::is_void_v<R>) {
    s.enqueue([&] { call(); });
    s.synchronize();
  } else {
    std::optional<R> out;
    s.enqueue([&] { out = call(); });
    s.synchronize();
    return std::move(*out);
  }
}

void EmuOps::resize(Buffer& b, Elem e, int64_t n) {
  kernels_->resize(b, e, n);
}

Buffer EmuOps::wrap(Tensor& t) {
  return kernels_->wrap(t);
}

void EmuOps::release(Buffer& wrapped) {
  kernels_->release(wrapped);
}

Buffer EmuOps::slice(const Buffer& b, int64_t begin, int64_t n) {
  return kernels_->slice(b, begin, n);
}

void EmuOps::finish() {
  stream().synchronize();
}

void EmuOps::upload(const void* host, Elem e, int64_t n, Buffer& out) {
  sized(out, e, n);
  std::vector<uint32_t> words(static_cast<size_t>(n > 0 ? n : 0));
  if (n > 0) std::memcpy(words.data(), host, 4 * words.size());
  later([words = std::move(words), e, n, o = out](Kernels& k) mutable {
    k.upload(words.data(), e, n, o);
  });
}

// The forwarding of every other call, from the one list in emu_ops.h.
#define ST_EMU_LATER(name, params, args)                                             \
  void EmuOps::name params {                                                         \
    later([=](Kernels& kernels_on_stream) mutable { kernels_on_stream.name args; }); \
  }
#define ST_EMU_SIZED(name, params, args, sizing)                                     \
  void EmuOps::name params {                                                         \
    sizing;                                                                          \
    later([=](Kernels& kernels_on_stream) mutable { kernels_on_stream.name args; }); \
  }
#define ST_EMU_WAIT(type, name, params, args)        \
  type EmuOps::name params {                         \
    return now([&] { return kernels_->name args; }); \
  }
ST_EMU_OPS(ST_EMU_LATER, ST_EMU_SIZED, ST_EMU_WAIT)
#undef ST_EMU_LATER
#undef ST_EMU_SIZED
#undef ST_EMU_WAIT

}  // namespace st::bulk
