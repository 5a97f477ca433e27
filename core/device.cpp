#include "core/device.h"

#include "core/error.h"

namespace st {

Device parse_device(const std::string& spec) {
  if (spec == "cpu") return Device::cpu();
  if (spec == "auto") return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
  if (spec.rfind("cuda", 0) == 0) {
    int index = 0;
    if (spec.size() > 4) {
      ST_CHECK(spec[4] == ':' && spec.size() > 5, "--device: cannot parse '", spec,
               "' (expected cpu, cuda, cuda:N or auto)");
      index = std::stoi(spec.substr(5));
    }
    ST_CHECK(cuda_built(), "--device ", spec,
             ": this sparsetrain was built without CUDA (configure with -DSPARSETRAIN_CUDA=ON)");
    int n = cuda_device_count();
    ST_CHECK(index < n, "--device ", spec, ": no such GPU (", n, " CUDA device(s) visible)");
    return Device::cuda(index);
  }
  ST_THROW("--device: unknown device '", spec, "' (expected cpu, cuda, cuda:N or auto)");
}

}  // namespace st
