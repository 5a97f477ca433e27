// Error checks for the CUDA libraries: each macro evaluates a call once and, on failure,
// throws st::Error naming the call, the library's own message and file:line. Usable from
// .cu and .cpp files (the library headers are plain C/C++).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "core/error.h"

#define ST_CUDA_CHECK(expr)                                                      \
  do {                                                                           \
    const cudaError_t st_status_ = (expr);                                       \
    if (st_status_ != cudaSuccess)                                               \
      ::st::detail::throw_error(__FILE__, __LINE__, "CUDA error: ", #expr,       \
                                " failed: ", cudaGetErrorName(st_status_), ": ", \
                                cudaGetErrorString(st_status_));                 \
  } while (0)

// After a kernel launch: reports bad launch configurations (not asynchronous faults,
// which surface at the next synchronising call).
#define ST_CUDA_CHECK_LAUNCH() ST_CUDA_CHECK(cudaGetLastError())

#define ST_CUDNN_CHECK(expr)                                                   \
  do {                                                                         \
    const cudnnStatus_t st_status_ = (expr);                                   \
    if (st_status_ != CUDNN_STATUS_SUCCESS)                                    \
      ::st::detail::throw_error(__FILE__, __LINE__, "cuDNN error: ", #expr,    \
                                " failed: ", cudnnGetErrorString(st_status_)); \
  } while (0)

#define ST_CUBLAS_CHECK(expr)                                                       \
  do {                                                                              \
    const cublasStatus_t st_status_ = (expr);                                       \
    if (st_status_ != CUBLAS_STATUS_SUCCESS)                                        \
      ::st::detail::throw_error(__FILE__, __LINE__, "cuBLAS error: ", #expr,        \
                                " failed: ", cublasGetStatusName(st_status_), ": ", \
                                cublasGetStatusString(st_status_));                 \
  } while (0)

#define ST_NCCL_CHECK(expr)                                                   \
  do {                                                                        \
    const ncclResult_t st_status_ = (expr);                                   \
    if (st_status_ != ncclSuccess)                                            \
      ::st::detail::throw_error(__FILE__, __LINE__, "NCCL error: ", #expr,    \
                                " failed: ", ncclGetErrorString(st_status_)); \
  } while (0)
