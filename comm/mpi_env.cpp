#include "comm/mpi_env.h"

#include <cstdlib>

namespace st {

void set_mpi_env_defaults() {
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  ::setenv("OMPI_MCA_btl_tcp_links", "2", /*overwrite=*/0);
}

}  // namespace st
