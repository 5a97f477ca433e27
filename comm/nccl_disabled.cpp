// Built without CUDA: asking for NCCL is a clear error.
#include "comm/mpi_communicator.h"

namespace st {

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int) {
  ST_THROW(
      "--comm nccl: this sparsetrain was built without CUDA/NCCL (configure with "
      "-DSPARSETRAIN_CUDA=ON)");
}

}  // namespace st
