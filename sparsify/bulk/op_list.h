// The operations of bulk::Ops, listed once. Everything that has one line of code per
// operation is generated from these lists: the pure virtual declarations of the core
// (bulk_ops.h) and of each family, the overrides CpuOps and CudaOps declare, and every
// decorator (bulk::Decorator: EmuOps, the timing decorator, the test decorators). Adding
// an operation to a family is one entry here plus its definitions in that family's
// <family>_cpu.cpp and <family>_cuda.cu. A pass only one method needs is not listed here:
// the method brings it (bulk/pass.h, Ops::run_pass).
//
// Entry: X(Family, Mode, return type, name, (parameters), (arguments), (buffers), (sizing))
//   Family   the interface class that declares it (Ops is the core)
//   Mode     how an asynchronous implementation treats the call (bulk::OpMode):
//              Handle   host bookkeeping only, no device memory touched (sizes, views)
//              Release  ends a wrap(): the buffer's memory goes back to the tensor
//              Later    queued and returns at once; its outputs are sized by the caller
//              Sized    queued after `sizing` sized its outputs on the host
//              Wait     returns a host value, or sizes an output from a result: waits
//              Fence    waits for everything queued (finish)
//              Comm     a collective on buffers
//   buffers  the buffers the call reads or writes (pointer arguments may be null), so a
//            decorator can watch each one
//   sizing   Sized only: the host-side sizing of the outputs, through sized(b, elem, n)
//
// The contract of every operation is the comment above its entry. Ranges are [begin,
// end) inside the buffer; indices are int32 positions in the buffer they refer to.
// "Bit-exact" means CPU and CUDA give the same bits for the same inputs.
#pragma once

// --- The core: memory, element-wise, statistics, selection, gather/scatter, collectives.
// Every implementation provides all of it. ---
#define ST_BULK_CORE_OPS(X)                                                                        \
  /* Sizes `b` for n elements of `e` (contents unspecified, capacity kept). */                     \
  X(Ops, Handle, void, resize, (Buffer & b, Elem e, int64_t n), (b, e, n), (&b), ())               \
  /* A buffer viewing a bucket tensor (F32, on this device); release() it before the tensor        \
     is used again outside bulk::Ops (a checking implementation writes it back then). */           \
  X(Ops, Handle, Buffer, wrap, (Tensor & t), (t), (), ())                                          \
  X(Ops, Release, void, release, (Buffer & wrapped), (wrapped), (&wrapped), ())                    \
  /* Host <-> buffer copies of n elements; for scalars, samples and small index lists. */          \
  X(Ops, Wait, void, upload, (const void* host, Elem e, int64_t n, Buffer& out),                   \
    (host, e, n, out), (&out), ())                                                                 \
  X(Ops, Wait, void, download, (const Buffer& b, int64_t begin, int64_t n, void* host),            \
    (b, begin, n, host), (&b), ())                                                                 \
  X(Ops, Later, void, copy,                                                                        \
    (const Buffer& src, int64_t src_begin, Buffer& dst, int64_t dst_begin, int64_t n),             \
    (src, src_begin, dst, dst_begin, n), (&src, &dst), ())                                         \
  /* A buffer aliasing n elements of b from `begin`. */                                            \
  X(Ops, Handle, Buffer, slice, (const Buffer& b, int64_t begin, int64_t n), (b, begin, n), (&b),  \
    ())                                                                                            \
  /* Returns when every call queued so far has completed: the fence before a wrapped tensor        \
     is read by anything that is not this implementation on this thread (the optimiser,            \
     a checkpoint). Where calls complete as they return (the CPU) it does nothing. */              \
  X(Ops, Fence, void, finish, (), (), (), ())                                                      \
  X(Ops, Later, void, fill, (Buffer & b, part::Range r, float v), (b, r, v), (&b), ())             \
  /* I32: start, start + 1, ... */                                                                 \
  X(Ops, Sized, void, iota, (Buffer & out, int64_t n, int32_t start), (out, n, start), (&out),     \
    (sized(out, Elem::I32, n)))                                                                    \
  /* y += a x over r */                                                                            \
  X(Ops, Later, void, axpy, (float a, const Buffer& x, part::Range r, Buffer& y), (a, x, r, y),    \
    (&x, &y), ())                                                                                  \
  X(Ops, Later, void, scale, (Buffer & y, part::Range r, float a), (y, r, a), (&y), ())            \
  /* Sums over r accumulated in double, one pass (host value). */                                  \
  X(Ops, Wait, Stats, stats, (const Buffer& x, part::Range r), (x, r), (&x), ())                   \
  /* The smallest and largest entry of an I32 buffer ({0, -1} when empty; host values). */         \
  X(Ops, Wait, IndexBounds, index_bounds, (const Buffer& idx), (idx), (&idx), ())                  \
  /* Positions with |x| >= tau (> when strict) in r, ascending. */                                 \
  X(Ops, Wait, void, select_abs,                                                                   \
    (const Buffer& x, part::Range r, float tau, bool strict, Buffer& out),                         \
    (x, r, tau, strict, out), (&x, &out), ())                                                      \
  /* Exact top-k by |x| in r, ties to the lower index, ascending; returns the k-th |x|. */         \
  X(Ops, Wait, float, topk_abs, (const Buffer& x, part::Range r, int64_t k, Buffer& out),          \
    (x, r, k, out), (&x, &out), ())                                                                \
  /* The distinct positions of `all` (ranks' segments at offsets[r] with counts[r] entries,        \
     positions < domain), in an order that depends only on `all` (the same on every rank). */      \
  X(Ops, Wait, void, union_of,                                                                     \
    (const Buffer& all, const std::vector<int64_t>& offsets, const std::vector<int64_t>& counts,   \
     int64_t domain, Buffer& out),                                                                 \
    (all, offsets, counts, domain, out), (&all, &out), ())                                         \
  /* out[j] = x[idx[j]] */                                                                         \
  X(Ops, Sized, void, gather, (const Buffer& x, const Buffer& idx, Buffer& out), (x, idx, out),    \
    (&x, &idx, &out), (sized(out, Elem::F32, idx.size())))                                         \
  /* y[idx[j]] += a vals[j] for j = 0, 1, ... in that order (repeated positions add up in          \
     index order: bit-exact). With a = -1 it takes a rank's own contribution out of its            \
     residual, x - v exactly. */                                                                   \
  X(Ops, Later, void, scatter_axpy, (float a, const Buffer& idx, const Buffer& vals, Buffer& y),   \
    (a, idx, vals, y), (&idx, &vals, &y), ())                                                      \
  /* y[idx[j]] = a vals[j] */                                                                      \
  X(Ops, Later, void, scatter_scaled, (const Buffer& idx, const Buffer& vals, float a, Buffer& y), \
    (idx, vals, a, y), (&idx, &vals, &y), ())                                                      \
  X(Ops, Later, void, zero_at, (const Buffer& idx, Buffer& y), (idx, y), (&idx, &y), ())           \
  /* A method's own pass (bulk/pass.h) over `b`, queued; the caller sized its outputs. */          \
  X(Ops, Later, void, run_pass, (const PassPtr& p, const PassBuffers& b), (p, b),                  \
    (b.at(0), b.at(1), b.at(2), b.at(3), b.at(4), b.at(5)), ())                                    \
  /* The same, waited for: returns the pass's host result. */                                      \
  X(Ops, Wait, PassResult, run_pass_waiting, (const PassPtr& p, const PassBuffers& b), (p, b),     \
    (b.at(0), b.at(1), b.at(2), b.at(3), b.at(4), b.at(5)), ())                                    \
  /* Collectives (the communicator decides MPI, NCCL or the emulated backend). */                  \
  X(Ops, Comm, void, allreduce_sum, (Communicator & comm, Buffer & b), (comm, b), (&b), ())        \
  /* out = the ranks' `in` concatenated in rank order; counts[r] = rank r's in.size(). */          \
  X(Ops, Comm, void, allgatherv,                                                                   \
    (Communicator & comm, const Buffer& in, const std::vector<int64_t>& counts, Buffer& out),      \
    (comm, in, counts, out), (&in, &out), ())                                                      \
  /* The same with every rank passing the same in.size() (padded gathers). */                      \
  X(Ops, Comm, void, allgather, (Communicator & comm, const Buffer& in, Buffer& out),              \
    (comm, in, out), (&in, &out), ())                                                              \
  X(Ops, Comm, void, broadcast, (Communicator & comm, Buffer & b, int root), (comm, b, root),      \
    (&b), ())

// --- Threshold extras: counts and compactions the threshold-search methods need
// (RedSync, SAGE, MiCRO, ExDyna, the sampled top-k, SIDCo's multi-stage fit). ---
#define ST_BULK_THRESHOLD_OPS(X)                                                                  \
  /* Count of |x| >= tau (> when strict) in r (host value). */                                    \
  X(ThresholdOps, Wait, int64_t, count_abs,                                                       \
    (const Buffer& x, part::Range r, float tau, bool strict), (x, r, tau, strict), (&x), ())      \
  /* MiCRO/ExDyna compare (part::passes) in `owned`; when nothing passes, the single              \
     position part::fallback_index(owned, t). */                                                  \
  X(ThresholdOps, Wait, void, threshold_select,                                                   \
    (const Buffer& x, part::Range owned, float tau, int64_t t, Buffer& out),                      \
    (x, owned, tau, t, out), (&x, &out), ())                                                      \
  /* topk_abs restricted to `candidates` (ascending positions in x). */                           \
  X(ThresholdOps, Wait, float, topk_abs_among,                                                    \
    (const Buffer& x, const Buffer& candidates, int64_t k, Buffer& out), (x, candidates, k, out), \
    (&x, &candidates, &out), ())                                                                  \
  /* Moments of a = |x| over r, over blocks of bulk::kMomentBlock:                                \
       tau < 0, log_scale > 0: sumlog = sum sidco::log_term(x, log_scale)                         \
       tau < 0:                count = r.size(), sum a, sumsq a^2                                 \
       tau >= 0:               count, sum, sumsq and min over a > tau (min = +inf if none) */     \
  X(ThresholdOps, Wait, sidco::Moments, exceed_moments,                                           \
    (const Buffer& x, part::Range r, float tau, double log_scale), (x, r, tau, log_scale), (&x),  \
    ())                                                                                           \
  /* exceed_moments(x, r, tau, 0) for tau >= 0 and, in the same pass, the exceedances             \
     compacted ascending: out_vals = x[i], out_idx = pos[i] when `pos` is given, else i.          \
     Exact everywhere. */                                                                         \
  X(ThresholdOps, Wait, sidco::Moments, exceed_compact,                                           \
    (const Buffer& x, part::Range r, float tau, const Buffer* pos, Buffer& out_idx,               \
     Buffer& out_vals),                                                                           \
    (x, r, tau, pos, out_idx, out_vals), (&x, pos, &out_idx, &out_vals), ())

// --- Quantisation and bit packing (QSGD, TernGrad, EF-signSGD, FFT's range floats). ---
#define ST_BULK_QUANT_OPS(X)                                                                      \
  /* Per group of `q`: scales (F32), codes (U32, q.bits() bits) and values (the dequantised       \
     x); stochastic rounding from philox_uniform(q.seed, q.stream, i). Given equal scales,        \
     codes and values are bit-exact. */                                                           \
  X(QuantOps, Sized, void, quantize,                                                              \
    (const QuantSpec& q, const Buffer& x, Buffer& scales, Buffer& codes, Buffer& values),         \
    (q, x, scales, codes, values), (&x, &scales, &codes, &values),                                \
    (sized(scales, Elem::F32, q.groups(x.size())), sized(codes, Elem::U32, x.size()),             \
     sized(values, Elem::F32, x.size())))                                                         \
  /* values = the dequantised codes, group scales read as float bits from                         \
     words[scales_at + g]. Bit-exact. */                                                          \
  X(QuantOps, Sized, void, dequantize,                                                            \
    (const QuantSpec& q, const Buffer& codes, const Buffer& words, int64_t scales_at,             \
     Buffer& values),                                                                             \
    (q, codes, words, scales_at, values), (&codes, &words, &values),                              \
    (sized(values, Elem::F32, codes.size())))                                                     \
  /* Least significant bit first: code j at bits [j bits, (j + 1) bits) of words[at ...];         \
     `words` must hold them; unused high bits zero. Bit-exact. */                                 \
  X(QuantOps, Later, void, pack_bits, (const Buffer& codes, int bits, Buffer& words, int64_t at), \
    (codes, bits, words, at), (&codes, &words), ())                                               \
  X(QuantOps, Sized, void, unpack_bits,                                                           \
    (const Buffer& words, int64_t at, int64_t count, int bits, Buffer& codes),                    \
    (words, at, count, bits, codes), (&words, &codes), (sized(codes, Elem::U32, count)))          \
  /* codes = quant::range_float_encode(f, x[i]), values their decoding. Bit-exact. */             \
  X(QuantOps, Sized, void, range_float_quantize,                                                  \
    (const quant::RangeFloat& f, const Buffer& x, Buffer& codes, Buffer& values),                 \
    (f, x, codes, values), (&x, &codes, &values),                                                 \
    (sized(codes, Elem::U32, x.size()), sized(values, Elem::F32, x.size())))                      \
  X(QuantOps, Sized, void, range_float_dequantize,                                                \
    (const quant::RangeFloat& f, const Buffer& codes, Buffer& values), (f, codes, values),        \
    (&codes, &values), (sized(values, Elem::F32, codes.size())))                                  \
  /* The smallest non-zero |x| in r (0 when none; host value). Bit-exact. */                      \
  X(QuantOps, Wait, float, abs_min_nonzero, (const Buffer& x, part::Range r), (x, r), (&x), ())   \
  /* Do a and b hold the same elements bit for bit (same size and type)? Host value: the          \
     exchange checks a packed message unpacks to exactly its selection. */                        \
  X(QuantOps, Wait, bool, same_bits, (const Buffer& a, const Buffer& b), (a, b), (&a, &b), ())

// --- Transforms (FFT): per-piece real FFTs and the coefficient passes around them. ---
#define ST_BULK_TRANSFORM_OPS(X)                                                                 \
  /* Unnormalised half spectrum of each piece into coef (sized by the caller); FFTW on the       \
     CPU, cuFFT on CUDA: equal up to rounding. */                                                \
  X(TransformOps, Later, void, rfft,                                                             \
    (const Buffer& x, const std::vector<FftPiece>& pieces, Buffer& coef), (x, pieces, coef),     \
    (&x, &coef), ())                                                                             \
  /* out[begin, begin + len) = inverse real FFT of the piece * (1 / len); coef unchanged. */     \
  X(TransformOps, Later, void, irfft,                                                            \
    (const Buffer& coef, const std::vector<FftPiece>& pieces, Buffer& out), (coef, pieces, out), \
    (&coef, &out), ())                                                                           \
  /* mag = re * re + im * im of each interleaved coefficient, in float. Bit-exact. */            \
  X(TransformOps, Sized, void, sq_magnitudes, (const Buffer& coef, Buffer& mag), (coef, mag),    \
    (&coef, &mag), (sized(mag, Elem::F32, coef.size() / 2)))                                     \
  /* Exact top-k by |x| in each range (ascending, disjoint), positions concatenated;             \
     returns the smallest k-th largest (+inf with no ranges). Bit-exact. */                      \
  X(TransformOps, Wait, float, topk_abs_ranges,                                                  \
    (const Buffer& x, const std::vector<TopkRange>& ranges, Buffer& out), (x, ranges, out),      \
    (&x, &out), ())                                                                              \
  /* out[2j] = 2 idx[j], out[2j + 1] = 2 idx[j] + 1. Bit-exact. */                               \
  X(TransformOps, Sized, void, pair_indices, (const Buffer& idx, Buffer& out), (idx, out),       \
    (&idx, &out), (sized(out, Elem::I32, 2 * idx.size())))

// --- Low rank (PowerSGD): dense algebra on messages. ---
#define ST_BULK_LOW_RANK_OPS(X)                                                                 \
  /* C[c_off ...] = alpha op(A) op(B) + beta C, row-major, natural leading dimensions;          \
     beta = 0 ignores C. OpenBLAS / cuBLAS: equal up to summation order. */                     \
  X(LowRankOps, Later, void, gemm,                                                              \
    (bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const Buffer& A, \
     int64_t a_off, const Buffer& B, int64_t b_off, float beta, Buffer& C, int64_t c_off),      \
    (trans_a, trans_b, m, n, k, alpha, A, a_off, B, b_off, beta, C, c_off), (&A, &B, &C), ())

// --- Tensor scope (--sp scope=tensor): bucket positions and per-tensor counts. ---
#define ST_BULK_SCOPE_OPS(X)                                                                    \
  /* idx[j] += delta (positions in a tensor become positions in the bucket). */                 \
  X(ScopeOps, Later, void, offset_indices, (Buffer & idx, int32_t delta), (idx, delta), (&idx), \
    ())                                                                                         \
  /* How many of idx[begin, begin + count) fall in each segment [segments[j],                   \
     segments[j + 1]) (the last open-ended); host values. */                                    \
  X(ScopeOps, Wait, std::vector<int64_t>, segment_counts,                                       \
    (const Buffer& idx, int64_t begin, int64_t count, const std::vector<int64_t>& segments),    \
    (idx, begin, count, segments), (&idx), ())

// The families an implementation may provide: F(class, accessor, name, list, extra...).
#define ST_BULK_FAMILIES(F, ...)                                                     \
  F(ThresholdOps, threshold, "threshold extras", ST_BULK_THRESHOLD_OPS, __VA_ARGS__) \
  F(QuantOps, quant, "quantisation and bit packing", ST_BULK_QUANT_OPS, __VA_ARGS__) \
  F(TransformOps, transform, "transforms", ST_BULK_TRANSFORM_OPS, __VA_ARGS__)       \
  F(LowRankOps, low_rank, "low rank", ST_BULK_LOW_RANK_OPS, __VA_ARGS__)             \
  F(ScopeOps, tensor_scope, "tensor scope", ST_BULK_SCOPE_OPS, __VA_ARGS__)

// Every operation, core and families.
#define ST_BULK_FAMILY_OPS_(Class, accessor, label, list, X) list(X)
#define ST_BULK_ALL_OPS(X) ST_BULK_CORE_OPS(X) ST_BULK_FAMILIES(ST_BULK_FAMILY_OPS_, X)

// Helpers for the generators: a parenthesised list without its parentheses.
#define ST_BULK_EXPAND(...) __VA_ARGS__

// An implementation's class head and family accessors: `class CpuOps :
// ST_BULK_FAMILIES(ST_BULK_PUBLIC_BASE) public Ops`, then ST_BULK_FAMILIES(ST_BULK_PROVIDE).
#define ST_BULK_PUBLIC_BASE(Class, ...) \
 public                                 \
  Class,
#define ST_BULK_PROVIDE(Class, accessor, ...) \
  Class* accessor() override {                \
    return this;                              \
  }

// Declarations generated from an entry.
#define ST_BULK_DECLARE_PURE(Family, Mode, ret, name, params, args, bufs, sizing) \
  virtual ret name params = 0;
#define ST_BULK_DECLARE_OVERRIDE(Family, Mode, ret, name, params, args, bufs, sizing) \
  ret name params override;
