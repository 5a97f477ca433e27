#include "layers/emu_dispatch.h"

#include "core/emu/stream.h"

namespace st {

Tensor run_on_emu(Device device, const std::function<Tensor()>& fn) {
  Tensor out;
  emu::run_in_stream_order(
      device.index, "a layer",
      [&] {
        out = fn();
        if (out.defined() && out.device() != device) {
          Tensor on_device =
              Tensor::empty(out.shape(), out.dtype(), device).with_layout(out.layout());
          on_device.copy_from(out);
          out = on_device;
        }
      },
      /*slow=*/true);
  return out;
}

}  // namespace st
