// Bulk passes over bucket data, behind one device interface.
//
// A sparsifier decides small things (thresholds, partitions, stage counts, k) from a few
// scalars on the host, identically on every rank; everything that walks over a bucket
// (statistics, compaction, top-k, gather/scatter, quantisation, transforms) and every
// collective on bucket data is a call on bulk::Ops. The CPU implementation runs today's
// OpenMP kernels; the CUDA implementation runs CUB/cuFFT/cuBLAS and its own kernels on the
// bucket's stream, with collectives on the communication stream. Sparsifiers and the
// exchange patterns in SparsifyHook never read or write a Buffer's memory themselves, so
// the CPU tests run every line of orchestration the GPU runs; a guarded implementation
// (tests) poisons buffer memory between calls to prove it.
//
// Per-element formulas shared by the CPU and CUDA implementations live in ST_HD headers
// (sparsify/partition_math.h, sparsify/quantizers.h, ...), not here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "sparsify/bulk/buffer.h"
#include "sparsify/bulk/op_list.h"
#include "sparsify/bulk/pass.h"
#include "sparsify/partition_math.h"
#include "sparsify/quant_math.h"
#include "sparsify/quant_spec.h"
#include "sparsify/sidco_moments.h"
#include "sparsify/transform_pieces.h"

namespace st {
class Communicator;
}

namespace st::bulk {

// Sums over a range, accumulated in double: one pass.
struct Stats {
  int64_t count = 0;
  double sum = 0, sum_sq = 0, abs_sum = 0;
  float abs_max = 0;
};

// Smallest and largest entry of an index buffer (Ops::index_bounds).
struct IndexBounds {
  int64_t min = 0, max = -1;
};

// exceed_moments and exceed_compact (ThresholdOps) reduce over fixed blocks of this many
// elements counted from r.begin, each block summed in float (SIMD lanes), the blocks added
// in double in block order (sidco::Moments::add): one implementation gives the same bits
// for any thread count; implementations may differ in the last bits of the sums.
inline constexpr int64_t kMomentBlock = 1 << 15;

// The families an implementation may provide beyond the core (op_list.h): each one a set
// of passes some methods need, an interface of its own. An implementation says which it
// has through the accessors of Ops (null: not provided); need<Family>() asks for one on a
// method's behalf.
#define ST_BULK_FAMILY_CLASS(Class, accessor, label, list, ...) \
  class Class {                                                 \
   public:                                                      \
    virtual ~Class() = default;                                 \
    list(ST_BULK_DECLARE_PURE)                                  \
  };
ST_BULK_FAMILIES(ST_BULK_FAMILY_CLASS)
#undef ST_BULK_FAMILY_CLASS

// How an asynchronous implementation treats a call (op_list.h, "Mode").
enum class OpMode : uint8_t { Handle, Release, Later, Sized, Wait, Fence, Comm };
// One operation as a decorator sees it.
struct OpInfo {
  const char* name = "";
  OpMode mode = OpMode::Wait;
};

// The interface: the core of op_list.h, and the families this implementation provides.
// Every call may return before the device has finished, except those that return host
// values (they wait).
class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;
  // A short name for logs and test output ("cpu", "cuda", "guarded-cpu").
  virtual const char* name() const = 0;

  ST_BULK_CORE_OPS(ST_BULK_DECLARE_PURE)

  // y[idx[j]] += vals[j] in index order: scatter_axpy with a = 1.
  void scatter_add(const Buffer& idx, const Buffer& vals, Buffer& y) {
    scatter_axpy(1.0f, idx, vals, y);
  }

#define ST_BULK_ABSENT(Class, accessor, ...) \
  virtual Class* accessor() {                \
    return nullptr;                          \
  }
  ST_BULK_FAMILIES(ST_BULK_ABSENT)
#undef ST_BULK_ABSENT

 protected:
  // Implementations reach memory through these (a Buffer's size is in elements).
  static Tensor& storage(Buffer& b) {
    return b.storage_;
  }
  static const Tensor& storage(const Buffer& b) {
    return b.storage_;
  }
  static void set_size(Buffer& b, Elem e, int64_t n) {
    b.elem_ = e;
    b.size_ = n;
  }
  static void set_storage(Buffer& b, Tensor t) {
    b.storage_ = std::move(t);
  }
  // A pass's buffers (run_pass) as the addresses `address(buffer)` gives: host pointers
  // for the CPU implementation, device pointers for CUDA; null for absent or empty ones.
  template <class Address>
  static PassMemory pass_memory(const PassBuffers& b, Address address) {
    PassMemory m;
    for (int i = 0; i < b.count(); ++i) {
      const Buffer* x = b.at(i);
      if (x == nullptr || x->empty()) continue;
      m.data[static_cast<size_t>(i)] = address(*x);
      m.size[static_cast<size_t>(i)] = x->size();
    }
    return m;
  }
};

using OpsPtr = std::unique_ptr<Ops>;

// The implementation for a device: CPU kernels, or CUDA on `device` (throws with one line
// when this build has no CUDA backend).
OpsPtr make_ops(Device device);
// The CUDA implementation (sparsify/bulk/core_cuda.cu); a build without the CUDA backend
// defines it in sparsify/bulk/cuda_ops_disabled.cpp, where it throws.
OpsPtr make_cuda_ops(Device device);
// A family of `ops` that --sparsifier `method` needs; throws one line naming the method,
// the family and the device when the implementation does not provide it.
template <class Family>
struct FamilyOf;
#define ST_BULK_FAMILY_OF(Class, accessor, label, ...)    \
  template <>                                             \
  struct FamilyOf<Class> {                                \
    static constexpr const char* kName = label;           \
    static Class* of(Ops& ops) { return ops.accessor(); } \
  };
ST_BULK_FAMILIES(ST_BULK_FAMILY_OF)
#undef ST_BULK_FAMILY_OF
[[noreturn]] void throw_missing_family(const std::string& method, const char* family,
                                       const Ops& ops);
template <class Family>
Family& need(Ops& ops, const std::string& method) {
  Family* f = FamilyOf<Family>::of(ops);
  if (f == nullptr) throw_missing_family(method, FamilyOf<Family>::kName, ops);
  return *f;
}

// Whether this build has that implementation (false: make_cuda_ops throws), so a
// sparsified run on a GPU is refused at start rather than at its first exchange.
bool cuda_ops_built();

}  // namespace st::bulk
