#include "core/tensor.h"

#include <cstring>

#include "core/emu/memory.h"
#include "core/emu/runtime.h"

namespace st {

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape.dims()) ST_CHECK(d >= 0, "negative dimension in shape ", shape);
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), device);
  return t;
}

Tensor Tensor::borrow(void* data, const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape.dims()) ST_CHECK(d >= 0, "negative dimension in shape ", shape);
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = Storage::borrow(data, t.nbytes(), device);
  return t;
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype) {
  for (int64_t d : shape.dims()) ST_CHECK(d >= 0, "negative dimension in shape ", shape);
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(t.nbytes(), Device::cpu(), true);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero();
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  Tensor t = empty(shape, DType::F32, Device::cpu());
  t.fill(value);
  return t.to(device);
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  ST_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: ", values.size(),
           " values do not fill shape ", shape);
  Tensor t = empty(shape);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::from_vector_i32(const std::vector<int32_t>& values, const Shape& shape) {
  ST_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector_i32: ", values.size(),
           " values do not fill shape ", shape);
  Tensor t = empty(shape, DType::I32);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (!is_plain()) throw_not_plain();
  ST_CHECK(shape.numel() == numel(), "reshape: cannot view ", str(), " as ", shape);
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice_flat(int64_t offset, const Shape& shape) const {
  if (!is_plain()) throw_not_plain();
  ST_CHECK(offset >= 0 && offset + shape.numel() <= numel(), "slice_flat: elements [", offset, ", ",
           offset + shape.numel(), ") out of range for ", str());
  Tensor t = *this;
  t.offset_ = offset_ + static_cast<size_t>(offset) * dtype_size(dtype_);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::with_layout(Layout layout) const {
  ST_CHECK(layout == Layout::Plain ||
               (rank() == 4 && dim(1) % 16 == 0 && (dtype_ == DType::F32 || dtype_ == DType::BF16)),
           "with_layout: ", str(), " cannot be blocked in 16 channels");
  Tensor t = *this;
  t.layout_ = layout;
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == device_) return *this;
  Tensor t = empty(shape_, dtype_, device);
  t.layout_ = layout_;
  t.copy_from(*this);
  return t;
}

Tensor Tensor::as_host_memory() const {
  ST_CHECK(device_.is_emu(), "as_host_memory: ", str(), " is not on an emulated device");
  check_emu_access();
  Tensor t = *this;
  t.device_ = Device::cpu();
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  t.layout_ = layout_;
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  ST_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_ && src.layout_ == layout_,
           "copy_from: destination ", str(), " does not match source ", src.str());
  if (nbytes() == 0) return;
  if (device_.is_cpu() && src.device_.is_cpu()) {
    std::memmove(raw(), src.raw(), nbytes());
  } else if (device_.is_emu() || src.device_.is_emu()) {
    emu::copy_bytes(address(), device_, src.address(), src.device_, nbytes());
  } else {
    cuda::copy_bytes(raw(), device_, src.raw(), src.device_, nbytes());
  }
}

void Tensor::zero() {
  if (nbytes() == 0) return;
  if (device_.is_cpu()) {
    std::memset(raw(), 0, nbytes());
  } else if (device_.is_emu()) {
    emu::zero_bytes(address(), nbytes(), device_.index);
  } else {
    cuda::zero_bytes(raw(), nbytes(), device_.index);
  }
}

void Tensor::fill(float value) {
  if (device_.is_cpu()) {
    float* p = f32();
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
  } else {
    Tensor host = full(shape_, value);
    copy_from(host);
  }
}

std::vector<float> Tensor::to_vector() const {
  Tensor host = to(Device::cpu());
  const float* p = host.f32();
  return std::vector<float>(p, p + numel());
}

std::string Tensor::str() const {
  return std::string(dtype_name(dtype_)) + shape_.str() + (is_plain() ? "" : " (nChw16c)") +
         " on " + device_.str();
}

void Tensor::throw_not_plain() const {
  ST_THROW("tensor ", str(), " is in a blocked layout: read it through to_plain() (core/layout.h)");
}

void Tensor::check_dtype(DType want) const {
  ST_CHECK(want == dtype_, "tensor ", str(), " accessed as ", dtype_name(want));
}

void Tensor::check_emu_access() const {
  ST_CHECK(emu::executing_device() == device_.index, "host code touched the memory of ", str(),
           ": emulated device memory is reachable only from a stream of ", device_.str(),
           " (copy it with to(Device::cpu()))");
}

void check_shape(const char* who, const char* what, const Shape& want, const Shape& got) {
  ST_CHECK(want == got, who, ": expected ", what, " shape ", want, ", got ", got);
}

}  // namespace st
