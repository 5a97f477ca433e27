#include "sparsify/bulk/pass.h"

#include "core/error.h"

namespace st::bulk {

PassBuffers::PassBuffers(std::initializer_list<const Buffer*> buffers) {
  ST_CHECK(buffers.size() <= kPassBuffers, "bulk::PassBuffers: ", buffers.size(),
           " buffers, at most ", kPassBuffers);
  for (const Buffer* b : buffers) {
    const auto i = static_cast<size_t>(count_++);
    present_[i] = b != nullptr;
    if (b) slots_[i] = *b;
  }
}

PassResult Pass::on_cuda(const PassMemory&) const {
  ST_THROW("bulk pass '", name(), "' has no CUDA body: its method cannot run on a CUDA device");
}

}  // namespace st::bulk
