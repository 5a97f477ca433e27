// The data bulk::Ops works on: a typed run of elements on the implementation's device.
#pragma once

#include <cstdint>

#include "core/tensor.h"

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

}  // namespace st::bulk
