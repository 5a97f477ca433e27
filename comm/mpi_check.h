// ST_MPI_CHECK: throws st::Error with file:line, the call and MPI's own error string.
#pragma once

#include <mpi.h>

#include "core/error.h"

namespace st::detail {
inline std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, static_cast<size_t>(len));
}
}  // namespace st::detail

#define ST_MPI_CHECK(call)                                                        \
  do {                                                                            \
    const int st_mpi_rc_ = (call);                                                \
    if (st_mpi_rc_ != MPI_SUCCESS)                                                \
      ::st::detail::throw_error(__FILE__, __LINE__, "MPI error in ", #call, ": ", \
                                ::st::detail::mpi_error_string(st_mpi_rc_));      \
  } while (0)
