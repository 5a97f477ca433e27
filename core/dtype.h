// Element types: float32 for math, int32/int64 for indices and labels, bfloat16 for the
// activations of `--precision bf16` (stored as the upper 16 bits of a float32; converted
// in core/kernels/half.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace st {

enum class DType { F32, I32, I64, BF16 };

inline size_t dtype_size(DType t) {
  return t == DType::I64 ? 8 : t == DType::BF16 ? 2 : 4;
}
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::I32:
      return "int32";
    case DType::I64:
      return "int64";
    case DType::BF16:
      return "bfloat16";
  }
  return "?";
}

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::I32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::I64;
}
// bfloat16 elements are read and written as their bits.
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::BF16;
}

}  // namespace st
