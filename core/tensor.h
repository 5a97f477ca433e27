// Tensor: a contiguous row-major view (shape, dtype, byte offset) into shared Storage.
// Copies between devices are explicit (to(), copy_from()); nothing synchronises behind
// the caller's back (a copy to or from an emulated device waits for its stream). Views (reshape,
// slice) share storage, which is how parameters and gradients live inside one flat buffer per
// bucket.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace st {

// How a tensor's elements lie in memory. Plain: row-major in its shape (NCHW for
// activations); every tensor is Plain unless a layer chose otherwise. Blocked16: for a
// float [N, C, H, W] with C a multiple of 16, oneDNN's nChw16c, i.e. row-major
// [N, C/16, H, W, 16]: the layout oneDNN's AVX-512 convolutions compute in, which
// convolutions and the per-channel and elementwise layers between them hand each other
// so that no reorder runs around every convolution (core/layout.h).
enum class Layout : uint8_t { Plain, Blocked16 };

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  // A CPU tensor in page-locked memory, which the GPU copies from without the CPU
  // (CUDA builds only; core/host_allocator.h).
  static Tensor empty_pinned(const Shape& shape, DType dtype = DType::F32);
  static Tensor full(const Shape& shape, float value, Device device = Device::cpu());
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  static Tensor from_vector_i32(const std::vector<int32_t>& values, const Shape& shape);
  // A view of memory another library owns (Storage::borrow): no copy, never freed here.
  static Tensor borrow(void* data, const Shape& shape, DType dtype, Device device = Device::cpu());

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return shape_.rank(); }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  Layout layout() const { return layout_; }
  bool is_plain() const { return layout_ == Layout::Plain; }

  // The elements in the plain layout: a Blocked16 tensor throws here, so code that reads
  // elements by their NCHW index cannot misread one (convert it with to_plain()).
  template <typename T>
  T* data() {
    check_access(dtype_of<T>());
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    check_access(dtype_of<T>());
    return reinterpret_cast<const T*>(raw());
  }
  float* f32() { return data<float>(); }
  const float* f32() const { return data<float>(); }
  // The floats in whatever layout the tensor has: for kernels that know the layout.
  float* f32_in_layout() {
    check_dtype(DType::F32);
    return static_cast<float*>(raw());
  }
  const float* f32_in_layout() const {
    check_dtype(DType::F32);
    return static_cast<const float*>(raw());
  }
  // The bfloat16 elements' bits in whatever layout the tensor has (core/kernels/half_math.h
  // converts them).
  uint16_t* bf16_in_layout() {
    check_dtype(DType::BF16);
    return static_cast<uint16_t*>(raw());
  }
  const uint16_t* bf16_in_layout() const {
    check_dtype(DType::BF16);
    return static_cast<const uint16_t*>(raw());
  }
  // The same storage and shape labelled with another layout (the bytes do not move).
  Tensor with_layout(Layout layout) const;
  // The first byte. Emulated device memory is reachable only from its device's stream
  // executor: anywhere else this throws naming the tensor (host code must copy it).
  void* raw() const {
    if (__builtin_expect(device_.type == DeviceType::EMU, 0)) check_emu_access();
    return address();
  }

  // On an emulated device's stream executor: this tensor's memory seen as host memory, as
  // a kernel sees it (host libraries such as MPI take it there). Throws anywhere else.
  Tensor as_host_memory() const;

  // Same storage, new shape with the same element count (plain tensors only).
  Tensor reshape(const Shape& shape) const;
  // View of `shape.numel()` elements starting `offset` elements into this tensor.
  Tensor slice_flat(int64_t offset, const Shape& shape) const;
  // Do two tensors share the same storage?
  bool shares_storage(const Tensor& o) const { return storage_ == o.storage_; }
  // Where the view starts in its storage, in bytes (address arithmetic without an access).
  size_t byte_offset() const { return offset_; }
  // The first byte's address, for bookkeeping only (an allocator's record_stream); never
  // dereferenced, so no access check.
  const void* block_address() const { return address(); }
  bool pinned() const { return storage_ && storage_->pinned(); }

  Tensor to(Device device) const;     // explicit copy (or self when already there)
  Tensor clone() const;               // keeps the layout
  void copy_from(const Tensor& src);  // shapes and layouts must match; devices may differ
  void zero();
  void fill(float value);                // CPU float tensors; CUDA through a kernel in core/cuda
  std::vector<float> to_vector() const;  // float32 copy on the host

  // "float32[128, 16, 32, 32] on cpu"
  std::string str() const;

 private:
  void check_dtype(DType want) const;
  void check_access(DType want) const {
    if (__builtin_expect(layout_ != Layout::Plain, 0)) throw_not_plain();
    check_dtype(want);
  }
  [[noreturn]] void throw_not_plain() const;
  void check_emu_access() const;
  void* address() const { return static_cast<char*>(storage_->data()) + offset_; }

  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_;
  Layout layout_ = Layout::Plain;
};

// Throws "<who>: expected <what> shape <want>, got <got>" when shapes differ.
void check_shape(const char* who, const char* what, const Shape& want, const Shape& got);

}  // namespace st
