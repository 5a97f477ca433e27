// A pass a method brings with it: the way a sparsifier (in the tree or out of it) adds a
// walk over bucket data that bulk::Ops does not have, without touching the interface.
// ggml's custom operators are the model: the method supplies the body, every
// implementation runs it where its memory is. A pass is a small object holding its
// scalars, with a body on host memory (run by the CPU implementation and, queued on the
// stream, by the emulated device) and, in builds with CUDA, a body on device memory (run
// on the calling thread's current stream). The method calls Ops::run_pass (queued; the
// caller sizes the outputs first) or Ops::run_pass_waiting (returns the pass's host
// result, e.g. how many entries of an output it wrote).
//
// DGC's momentum correction (sparsify/dgc.cpp) and VGC's variance test and wire words
// (sparsify/vgc.cpp) are passes; tests/sparsify/toy_method_test.cpp adds one from outside.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>

#include "sparsify/bulk/buffer.h"

namespace st::bulk {

// At most this many buffers per pass call.
inline constexpr int kPassBuffers = 6;

// The buffers one call reads or writes, in the pass's own order. The handles are copied
// at the call, as every queued operation of bulk::Ops takes them: a queued pass sees the
// sizes the caller gave before calling, and writes into the same memory.
class PassBuffers {
 public:
  PassBuffers(std::initializer_list<const Buffer*> buffers);
  int count() const { return count_; }
  // Slot i, or null when the call passed fewer buffers or a null one.
  const Buffer* at(int i) const {
    return i < count_ && present_[static_cast<size_t>(i)] ? &slots_[static_cast<size_t>(i)]
                                                          : nullptr;
  }

 private:
  std::array<Buffer, kPassBuffers> slots_{};
  std::array<bool, kPassBuffers> present_{};
  int count_ = 0;
};

// A pass's view of its buffers' memory: host pointers in on_host, device pointers in
// on_cuda; null for an absent or empty buffer.
struct PassMemory {
  std::array<void*, kPassBuffers> data{};
  std::array<int64_t, kPassBuffers> size{};
  float* f32(int i) const { return static_cast<float*>(data[static_cast<size_t>(i)]); }
  int32_t* i32(int i) const { return static_cast<int32_t*>(data[static_cast<size_t>(i)]); }
  uint32_t* u32(int i) const { return static_cast<uint32_t*>(data[static_cast<size_t>(i)]); }
  int64_t n(int i) const { return size[static_cast<size_t>(i)]; }
};

// What a waited-for pass tells the host: a count (e.g. how many entries of an output it
// wrote) and a value (e.g. the largest magnitude it saw).
struct PassResult {
  int64_t count = 0;
  double value = 0;
};

class Pass {
 public:
  virtual ~Pass() = default;
  // Names the pass in errors ("dgc momentum correction").
  virtual const char* name() const = 0;
  // The body on host memory: the CPU, and the emulated device's stream executor.
  virtual PassResult on_host(const PassMemory& m) const = 0;
  // The body on a CUDA device, on the calling thread's current stream; a pass without one
  // is refused on CUDA in one line naming it. Override it under SPARSETRAIN_WITH_CUDA.
  virtual PassResult on_cuda(const PassMemory& m) const;
};

using PassPtr = std::shared_ptr<const Pass>;

}  // namespace st::bulk
