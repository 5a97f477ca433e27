#include "sparsify/device_state.h"

#include "sparsify/bulk/cpu_ops.h"

namespace st {

bulk::Ops& thread_cpu_ops() {
  thread_local bulk::CpuOps ops;
  return ops;
}

bool DeviceState::bind(bulk::Ops& ops, int64_t n, const std::vector<float>* init) {
  ops_ = &ops;
  on_cpu_ = ops.device().is_cpu();
  if (!loaded_.empty() && static_cast<int64_t>(loaded_.size()) == n) {
    ops.upload(loaded_.data(), bulk::Elem::F32, n, buf_);
    loaded_.clear();
    return false;
  }
  loaded_.clear();
  if (buf_.size() == n && !buf_.empty()) return false;
  if (init != nullptr) {
    ops.upload(init->data(), bulk::Elem::F32, n, buf_);
  } else {
    ops.resize(buf_, bulk::Elem::F32, n);
    ops.fill(buf_, {0, n}, 0.0f);
  }
  return true;
}

void DeviceState::assign(bulk::Ops& ops, const std::vector<float>& v) {
  ops_ = &ops;
  on_cpu_ = ops.device().is_cpu();
  loaded_.clear();
  ops.upload(v.data(), bulk::Elem::F32, static_cast<int64_t>(v.size()), buf_);
}

std::vector<float> DeviceState::host() const {
  if (buf_.empty()) return loaded_;
  std::vector<float> v(static_cast<size_t>(buf_.size()));
  bulk::Ops& ops = on_cpu_ ? thread_cpu_ops() : *ops_;
  ops.download(buf_, 0, buf_.size(), v.data());
  return v;
}

void DeviceState::load(StateReader& in) {
  loaded_ = in.get_vector<float>();
  buf_ = bulk::Buffer();
}

}  // namespace st
