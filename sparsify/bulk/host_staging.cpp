#include "sparsify/bulk/host_staging.h"

namespace st::bulk {

void on_host_copies(const std::vector<Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                    const std::function<void()>& op) {
  std::vector<Tensor> on_device_in, on_device_out;
  for (Tensor* t : inputs) {
    on_device_in.push_back(*t);
    *t = t->to(Device::cpu());
  }
  for (Tensor* t : outputs) {
    on_device_out.push_back(*t);
    *t = t->to(Device::cpu());
  }
  op();
  for (size_t i = 0; i < outputs.size(); ++i) {
    on_device_out[i].copy_from(*outputs[i]);
    *outputs[i] = on_device_out[i];
  }
  for (size_t i = 0; i < inputs.size(); ++i) *inputs[i] = on_device_in[i];
}

}  // namespace st::bulk
