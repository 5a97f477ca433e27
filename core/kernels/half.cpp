#include "core/kernels/half.h"

#include <immintrin.h>

#include <cstring>

#include "core/error.h"
#include "core/kernels/half_math.h"
#include "core/parallel.h"

namespace st {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::BF16:
      return "bf16";
    case Precision::F16:
      return "fp16";
    default:
      return "fp32";
  }
}

Precision parse_precision(const std::string& name, const char* flag) {
  for (Precision p : {Precision::F32, Precision::BF16, Precision::F16})
    if (name == precision_name(p)) return p;
  ST_THROW("unknown ", flag, " '", name, "'; valid: fp32, bf16, fp16");
}

namespace cpu {

uint16_t float_to_bf16(float v) {
  return half_math::float_to_bf16(v);
}

float bf16_to_float(uint16_t h) {
  return half_math::bf16_to_float(h);
}

// F16C (every x86-64 CPU since 2012): exact IEEE conversions in hardware.
__attribute__((target("f16c"))) uint16_t float_to_f16(float v) {
  return static_cast<uint16_t>(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("f16c"))) float f16_to_float(uint16_t h) {
  return _cvtsh_ss(h);
}

namespace {

__attribute__((target("avx,f16c"))) void round_f16(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = f16_to_float(float_to_f16(in[i]));
}

void round_bf16(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(float_to_bf16(in[i]));
}

}  // namespace

void round_to(Precision p, const float* in, float* out, int64_t n) {
  parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
    if (p == Precision::F16)
      round_f16(in + b, out + b, e - b);
    else if (p == Precision::BF16)
      round_bf16(in + b, out + b, e - b);
    else if (in != out)
      std::memcpy(out + b, in + b, static_cast<size_t>(e - b) * 4);
  });
}

Tensor rounded(const Tensor& t, Precision p) {
  if (p == Precision::F32) return t;
  // Host memory: a CPU tensor, or an emulated device's inside its stream's task.
  ST_CHECK(!t.device().is_cuda(), "rounding to ", precision_name(p), " needs a CPU tensor, got ",
           t.str());
  Tensor r = Tensor::empty(t.shape());
  round_to(p, t.f32(), r.f32(), t.numel());
  return r;
}

Tensor to_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  const auto floating = [](DType d) { return d == DType::F32 || d == DType::BF16; };
  ST_CHECK(floating(t.dtype()) && floating(dtype) && !t.device().is_cuda(),
           "to_dtype: cannot make ", t.str(), " ", dtype_name(dtype),
           " (float32 and bfloat16 host tensors convert)");
  Tensor out = Tensor::empty(t.shape(), dtype, t.device()).with_layout(t.layout());
  if (dtype == DType::BF16) {
    const float* in = t.f32_in_layout();
    uint16_t* o = out.bf16_in_layout();
    parallel_for(t.numel(), 1 << 15, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) o[i] = half_math::float_to_bf16(in[i]);
    });
  } else {
    const uint16_t* in = t.bf16_in_layout();
    float* o = out.f32_in_layout();
    parallel_for(t.numel(), 1 << 15, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) o[i] = half_math::bf16_to_float(in[i]);
    });
  }
  return out;
}

void pack_half(Precision p, const float* in, float scale, uint16_t* out, int64_t n) {
  ST_CHECK(p != Precision::F32, "pack_half: fp32 is not a 16-bit format");
  for (int64_t i = 0; i < n; ++i)
    out[i] = p == Precision::BF16 ? float_to_bf16(in[i] * scale) : float_to_f16(in[i] * scale);
}

void add_half(Precision p, const uint16_t* in, float* out, int64_t n) {
  ST_CHECK(p != Precision::F32, "add_half: fp32 is not a 16-bit format");
  for (int64_t i = 0; i < n; ++i)
    out[i] += p == Precision::BF16 ? bf16_to_float(in[i]) : f16_to_float(in[i]);
}

}  // namespace cpu
}  // namespace st
