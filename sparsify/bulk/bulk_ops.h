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
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "sparsify/partition_math.h"
#include "sparsify/quant_math.h"
#include "sparsify/sidco_moments.h"

namespace st {
class Communicator;
}

namespace st::bulk {

enum class Elem : uint8_t { F32, I32, U32 };

// A buffer on the implementation's device: `size()` elements of one type. Only bulk::Ops
// implementations reach its memory; everyone else passes it around. Buffers keep their
// capacity when resized smaller, so per-bucket scratch does not reallocate each step.
class Buffer {
 public:
  Buffer() = default;
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Elem elem() const { return elem_; }

 private:
  friend class Ops;
  Tensor storage_;  // capacity >= size_; F32 or I32 tensor on the device
  int64_t size_ = 0;
  Elem elem_ = Elem::F32;
};

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

// --- Types of the quantisation, transform and dense-algebra section (Ops below) ---

// What Ops::quantize computes. Groups share one scale: fixed chunks of `chunk` elements
// (the last one shorter) when chunk > 0, else the groups starting at `starts` (ascending,
// starts[0] = 0; the last one runs to the end).
enum class QuantKind : uint8_t {
  Qsgd,      // scale = L2 norm; code = level_code(qsgd_level(...), bits)
  TernGrad,  // scale = terngrad_scale(max |x|, sum, sum sq, len, clip); 2-bit level code
  Sign,      // scale = L1 norm / len (EF-signSGD); code = 1 when x < 0
};
struct QuantSpec {
  QuantKind kind = QuantKind::Qsgd;
  int64_t chunk = 0;
  std::vector<int64_t> starts;
  int32_t levels = 1;             // QSGD s
  float clip = 0;                 // TernGrad c (<= 0: off)
  uint64_t seed = 0, stream = 0;  // Philox key of the stochastic rounding (QSGD, TernGrad)
  // Bits of one code: QSGD sign + ceil(log2(s + 1)), TernGrad 2, Sign 1.
  int bits() const {
    if (kind != QuantKind::Qsgd) return kind == QuantKind::TernGrad ? 2 : 1;
    int b = 0;
    while ((int64_t{1} << b) < int64_t{levels} + 1) ++b;
    return 1 + b;
  }
  // The number of groups of n elements, and group g's range.
  int64_t groups(int64_t n) const {
    if (chunk > 0) return (n + chunk - 1) / chunk;
    return starts.empty() ? (n > 0 ? 1 : 0) : static_cast<int64_t>(starts.size());
  }
  part::Range group(int64_t g, int64_t n) const {
    if (chunk > 0) return {g * chunk, std::min(n, (g + 1) * chunk)};
    if (starts.empty()) return {0, n};
    const auto u = static_cast<size_t>(g);
    return {starts[u], u + 1 < starts.size() ? starts[u + 1] : n};
  }
};

// One real transform: bucket elements [begin, begin + len) <-> the half spectrum at
// [coef, coef + 2 (len/2 + 1)) of the coefficient buffer, interleaved (re, im).
struct FftPiece {
  int64_t begin = 0, len = 0, coef = 0;
};

// One range of Ops::topk_abs_ranges: the k largest |x| of [begin, end).
struct TopkRange {
  int64_t begin = 0, end = 0, k = 0;
};

// The interface. Ranges are [begin, end) inside the buffer; indices are int32 positions
// in the buffer they refer to. Every call may return before the device has finished,
// except those that return host values (they wait).
class Ops {
 public:
  virtual ~Ops() = default;
  virtual Device device() const = 0;
  // A short name for logs and test output ("cpu", "cuda", "guarded-cpu").
  virtual const char* name() const = 0;

  // --- Memory ---
  // Sizes `b` for n elements of `e` (contents unspecified, capacity kept).
  virtual void resize(Buffer& b, Elem e, int64_t n) = 0;
  // A buffer viewing a bucket tensor (F32, on this device). release() must be called
  // before the tensor is used again outside bulk::Ops (the guarded implementation
  // writes its shadow back there).
  virtual Buffer wrap(Tensor& t) = 0;
  virtual void release(Buffer& wrapped) = 0;
  // Host <-> buffer copies of n elements; for scalars, samples and small index lists.
  virtual void upload(const void* host, Elem e, int64_t n, Buffer& out) = 0;
  virtual void download(const Buffer& b, int64_t begin, int64_t n, void* host) = 0;
  virtual void copy(const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin,
                    int64_t n) = 0;
  // Returns when every call queued so far has completed: the fence before a wrapped tensor
  // is read by anything that is not this implementation on this thread (the optimiser on
  // the compute stream, a checkpoint). Calls that return host values already wait; where
  // calls complete as they return (the CPU), it does nothing.
  virtual void finish() {}
  virtual void fill(Buffer& b, part::Range r, float v) = 0;      // F32
  virtual void iota(Buffer& out, int64_t n, int32_t start) = 0;  // I32: start, start+1, ...

  // --- Element-wise ---
  virtual void axpy(float a, const Buffer& x, part::Range r, Buffer& y) = 0;  // y += a x
  virtual void scale(Buffer& y, part::Range r, float a) = 0;                  // y *= a

  // --- Statistics (host values; the call waits) ---
  virtual Stats stats(const Buffer& x, part::Range r) = 0;
  // Count of |x| >= tau (|x| > tau when `strict`) in r.
  virtual int64_t count_abs(const Buffer& x, part::Range r, float tau, bool strict) = 0;

  // --- Selection (indices ascending, positions in x; the count is out.size()) ---
  // |x| >= tau (> when strict) in r.
  virtual void select_abs(const Buffer& x, part::Range r, float tau, bool strict, Buffer& out) = 0;
  // MiCRO/ExDyna compare (part::passes) in `owned`; when nothing passes, the single
  // position part::fallback_index(owned, t).
  virtual void threshold_select(const Buffer& x, part::Range owned, float tau, int64_t t,
                                Buffer& out) = 0;
  // Exact top-k by |x| in r, ties to the lower index; returns the k-th largest |x|.
  virtual float topk_abs(const Buffer& x, part::Range r, int64_t k, Buffer& out) = 0;
  // The same restricted to `candidates` (ascending positions in x).
  virtual float topk_abs_among(const Buffer& x, const Buffer& candidates, int64_t k,
                               Buffer& out) = 0;

  // --- Gather / scatter (idx: I32 positions in the F32 buffer they address) ---
  virtual void gather(const Buffer& x, const Buffer& idx, Buffer& out) = 0;  // out[j]=x[idx[j]]
  virtual void scatter_add(const Buffer& idx, const Buffer& vals, Buffer& y) = 0;
  // y[idx[j]] = a * vals[j]
  virtual void scatter_scaled(const Buffer& idx, const Buffer& vals, float a, Buffer& y) = 0;
  virtual void zero_at(const Buffer& idx, Buffer& y) = 0;
  // The distinct positions of `all` (I32, ranks' segments at offsets[r] with counts[r]
  // entries, positions < domain), in an order that depends only on `all`, so it is the
  // same on every rank.
  virtual void union_of(const Buffer& all, const std::vector<int64_t>& offsets,
                        const std::vector<int64_t>& counts, int64_t domain, Buffer& out) = 0;

  // --- Collectives on buffers (the communicator decides MPI or NCCL) ---
  virtual void allreduce_sum(Communicator& comm, Buffer& b) = 0;
  // out = the ranks' `in` concatenated in rank order; counts[r] = rank r's in.size().
  virtual void allgatherv(Communicator& comm, const Buffer& in, const std::vector<int64_t>& counts,
                          Buffer& out) = 0;
  virtual void broadcast(Communicator& comm, Buffer& b, int root) = 0;

  // A buffer aliasing n elements of b from `begin` (tensor-scope selection runs on one
  // tensor of the bucket at a time).
  virtual Buffer slice(const Buffer& b, int64_t begin, int64_t n) = 0;

  // Method-specific bulk passes (quantisers, SIDCo's stage moments, transforms, dense
  // algebra) follow in their own sections below, each with its per-element formula in
  // an ST_HD header.

  // --- Exchange extras (what SparsifyHook's patterns need beyond the calls above) ---
  // out = the ranks' `in` concatenated in rank order; every rank passes the same
  // in.size() (the union pattern's index gather, padded to the largest count).
  virtual void allgather(Communicator& comm, const Buffer& in, Buffer& out) = 0;
  // y[idx[j]] += a * vals[j] for j = 0, 1, ... in that order (repeated positions add up
  // in index order, so the result is bit-exact across implementations). With a = -1 this
  // takes a rank's own contribution out of its residual: x - v exactly.
  virtual void scatter_axpy(float a, const Buffer& idx, const Buffer& vals, Buffer& y) = 0;
  // idx[j] += delta for every entry (I32): positions in a tensor of a bucket become
  // positions in the bucket.
  virtual void offset_indices(Buffer& idx, int32_t delta) = 0;
  // The smallest and largest entry of an I32 buffer (host values; the call waits). An
  // empty buffer gives {0, -1}. The hook checks received positions with it.
  virtual IndexBounds index_bounds(const Buffer& idx) = 0;
  // Do a and b hold the same elements, bit for bit (same size and type)? Host value.
  virtual bool same_bits(const Buffer& a, const Buffer& b) = 0;
  // For the `count` positions of idx from `begin` (I32): how many fall in each segment
  // [segments[j], segments[j+1]) (the last one open-ended); segments ascending, starting
  // at 0. Host values (tensor scope's per-tensor feedback).
  virtual std::vector<int64_t> segment_counts(const Buffer& idx, int64_t begin, int64_t count,
                                              const std::vector<int64_t>& segments) = 0;
  // The buffer's elements in host memory, when this implementation keeps buffers there and
  // lets host code use them in place (the CPU implementation); null otherwise (CUDA, and
  // the guarded test implementation, so it hides no direct access). Only the adapters that
  // run the host forms of methods that are not device_ready() use it (sparsifier.cpp),
  // to spare a copy of the bucket per call; everyone else goes through the calls above.
  virtual void* host_memory(const Buffer& /*b*/) { return nullptr; }

  // --- Threshold-family extras (SIDCo's multi-stage estimate, sparsify/sidco_fit.h) ---
  // Both passes below reduce over fixed blocks of kMomentBlock elements counted from
  // r.begin, each block summed in float (SIMD lanes), the blocks added in double in block
  // order (sidco::Moments::add), so one implementation gives the same bits for any thread
  // count. Implementations may differ from one another in the last bits of the sums
  // (CUDA adds in another order); count and min are exact everywhere.
  static constexpr int64_t kMomentBlock = 1 << 15;
  // Moments of a = |x| over r:
  //   tau < 0, log_scale > 0: sumlog = sum sidco::log_term(x, log_scale), summed in double
  //                           inside each block; the other fields are unspecified
  //   tau < 0:                count = r.size(), sum a, sumsq a^2 (min unspecified)
  //   tau >= 0:               count, sum, sumsq and min over the strict exceedances
  //                           a > tau (min = +inf when there are none); sumlog = 0
  virtual sidco::Moments exceed_moments(const Buffer& x, part::Range r, float tau,
                                        double log_scale) = 0;
  // exceed_moments(x, r, tau, 0) for tau >= 0 and, in the same pass, the exceedances
  // compacted in ascending order of i: out_vals = x[i] (signed), out_idx = pos[i] when
  // `pos` is given (I32, mapping positions of x to bucket positions: x is then an earlier
  // compaction's out_vals), i otherwise, for every i in r with |x[i]| > tau. out_idx and
  // out_vals must not alias x or pos. The compaction is exact on every implementation.
  virtual sidco::Moments exceed_compact(const Buffer& x, part::Range r, float tau,
                                        const Buffer* pos, Buffer& out_idx, Buffer& out_vals) = 0;

  // --- Quantisation, transforms, dense algebra (DGC, VGC, the quantisers, EF-signSGD,
  // FFT, PowerSGD). "Bit-exact" below means CPU and CUDA give the same bits for the same
  // inputs; per-element formulas are the ST_HD ones in sparsify/quant_math.h. ---

  // DGC momentum correction (Lin et al., ICLR 2018, eqs. 6-7) on the gradient g = x - seen,
  // for i < x.size(): u = m u + (x - seen); v = v + u; seen = x (float arithmetic, in this
  // order). Bit-exact up to the contraction of m u + g into one FMA, which each compiler
  // decides (the CPU build may fuse it).
  virtual void dgc_momentum(float m, const Buffer& x, Buffer& u, Buffer& v, Buffer& seen) = 0;

  // VGC's variance test (Tsuzuku et al. 2018) over i < x.size(), with add = aux[i] when
  // `aux` is given, else grad[i] * grad[i] * inv_batch (one of the two is given):
  //   vi = v[i] + add; send when x[i]^2 > alpha vi or (tau > 0 and |x[i]| > tau);
  //   sent: v[i] = 0 and i goes to `out` (I32, ascending); unsent: v[i] = vi * zeta.
  // Returns the largest |x| sent (0 when none; host value, the call waits). Bit-exact up to
  // FMA contraction of the products.
  virtual float vgc_test(const Buffer& x, const Buffer* aux, const Buffer* grad, float inv_batch,
                         float alpha, float zeta, float tau, Buffer& v, Buffer& out) = 0;
  // VGC's wire words for the selection `idx`: packed (U32, idx.size() + 1 words) = the bits
  // of `scale`, then quant::vgc_encode(idx[j], x[idx[j]], scale, index_bits) per entry;
  // values (F32) = quant::vgc_value of each word. Bit-exact.
  virtual void vgc_pack(const Buffer& x, const Buffer& idx, float scale, int index_bits,
                        Buffer& packed, Buffer& values) = 0;
  // The inverse: the `count` >= 1 words of `words` from `offset` (a scale word, then
  // entries) to idx (I32) and values (F32), count - 1 each. Bit-exact.
  virtual void vgc_unpack(const Buffer& words, int64_t offset, int64_t count, int index_bits,
                          Buffer& idx, Buffer& values) = 0;

  // Quantises x (n = x.size()) per group of `q` (QuantSpec): scales (F32, one per group),
  // codes (U32, n, q.bits() bits each) and values (F32, n; the dequantised x). Stochastic
  // rounding takes u_i = philox_uniform(q.seed, q.stream, i). Scales sum in double: the
  // L2 norm is sqrt of the squares summed in index order (rounded to float); the L1 mean
  // is the sum of |x| divided by the length; TernGrad sums x and x^2 (the CPU over fixed
  // blocks of 65536 elements added in block order, for any thread count). Given equal
  // scales, codes and values are bit-exact; the scales themselves may differ in the last
  // bits between implementations (summation order).
  virtual void quantize(const QuantSpec& q, const Buffer& x, Buffer& scales, Buffer& codes,
                        Buffer& values) = 0;
  // values (F32, codes.size()) = the dequantised codes of `q`, the group scales read as
  // float bits from words[scales_at + g] (the wire format keeps them there). Bit-exact.
  virtual void dequantize(const QuantSpec& q, const Buffer& codes, const Buffer& words,
                          int64_t scales_at, Buffer& values) = 0;
  // Bit packing, least significant bit first: code j occupies bits [j bits, (j + 1) bits)
  // of the stream words[at], words[at + 1], ...; only the low `bits` (1..32) of each code
  // count; the ceil(codes.size() bits / 32) words written have their unused high bits zero.
  // `words` (U32) must already hold them. Bit-exact.
  virtual void pack_bits(const Buffer& codes, int bits, Buffer& words, int64_t at) = 0;
  // codes (U32, `count`) = the inverse, from words[at ...] (which must hold them).
  virtual void unpack_bits(const Buffer& words, int64_t at, int64_t count, int bits,
                           Buffer& codes) = 0;
  // codes (U32) = quant::range_float_encode(f, x[i]) and values (F32) = their decoding.
  // Bit-exact.
  virtual void range_float_quantize(const quant::RangeFloat& f, const Buffer& x, Buffer& codes,
                                    Buffer& values) = 0;
  // values (F32, codes.size()) = quant::range_float_decode(f, codes[i]). Bit-exact.
  virtual void range_float_dequantize(const quant::RangeFloat& f, const Buffer& codes,
                                      Buffer& values) = 0;
  // The smallest non-zero |x| in r (0 when there is none); host value. Bit-exact.
  virtual float abs_min_nonzero(const Buffer& x, part::Range r) = 0;

  // Real FFTs per piece (FftPiece): rfft writes each piece's unnormalised half spectrum
  // of x into coef (F32, sized by the caller to cover every piece); irfft writes
  // out[begin, begin + len) = (inverse real FFT of the piece's coefficients) * (1 / len),
  // the scale a float multiplication, leaving `coef` unchanged. FFTW on the CPU, cuFFT on
  // CUDA: equal up to rounding (about 1e-6 relative), not bit-exact.
  virtual void rfft(const Buffer& x, const std::vector<FftPiece>& pieces, Buffer& coef) = 0;
  virtual void irfft(const Buffer& coef, const std::vector<FftPiece>& pieces, Buffer& out) = 0;
  // mag (F32, coef.size() / 2) = re^2 + im^2 of each interleaved complex coefficient, as
  // re * re + im * im in float (CUDA without contraction: __fmul_rn / __fadd_rn). Bit-exact.
  virtual void sq_magnitudes(const Buffer& coef, Buffer& mag) = 0;
  // Exact top-k by |x| inside each range (ascending, disjoint; 1 <= k <= its length), ties
  // to the lower index, the ranges' positions concatenated in `out` (I32, ascending).
  // Returns the smallest of the ranges' k-th largest |x| (+inf with no ranges). Bit-exact.
  virtual float topk_abs_ranges(const Buffer& x, const std::vector<TopkRange>& ranges,
                                Buffer& out) = 0;
  // out (I32, 2 idx.size()): out[2j] = 2 idx[j], out[2j + 1] = 2 idx[j] + 1 (a complex
  // coefficient's positions among interleaved floats). Bit-exact.
  virtual void pair_indices(const Buffer& idx, Buffer& out) = 0;

  // C[c_off ...] = alpha op(A) op(B) + beta C: row-major with natural leading dimensions,
  // op(A) m x k (A stored k x m when trans_a) from A[a_off], op(B) k x n from B[b_off],
  // C m x n (F32 buffers). beta = 0 ignores C's contents. OpenBLAS on the CPU, cuBLAS on
  // CUDA: equal up to summation order, not bit-exact.
  virtual void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const Buffer& A, int64_t a_off, const Buffer& B, int64_t b_off, float beta,
                    Buffer& C, int64_t c_off) = 0;

 protected:
  // Implementations reach memory through these (a Buffer's size is in elements).
  static Tensor& storage(Buffer& b) { return b.storage_; }
  static const Tensor& storage(const Buffer& b) { return b.storage_; }
  static void set_size(Buffer& b, Elem e, int64_t n) {
    b.elem_ = e;
    b.size_ = n;
  }
  static void set_storage(Buffer& b, Tensor t) { b.storage_ = std::move(t); }
};

using OpsPtr = std::unique_ptr<Ops>;

// The implementation for a device: CPU kernels, or CUDA on `device` (throws with one line
// when this build has no CUDA backend).
OpsPtr make_ops(Device device);
// The CUDA implementation (sparsify/bulk/cuda_ops.cu); a build without the CUDA backend
// defines it in sparsify/bulk/cuda_ops_disabled.cpp, where it throws.
OpsPtr make_cuda_ops(Device device);
// Whether this build has that implementation (false: make_cuda_ops throws), so a
// sparsified run on a GPU is refused at start rather than at its first exchange.
bool cuda_ops_built();

}  // namespace st::bulk
