// The error-check macros and device discovery work without a GPU, so these run everywhere.
#include <gtest/gtest.h>

#include <string>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/device.h"
#include "tests/cuda/cuda_test_util.h"

namespace st::test {
namespace {

cudaError_t failing_cuda_call() {
  return cudaErrorInvalidValue;
}
cudnnStatus_t failing_cudnn_call() {
  return CUDNN_STATUS_BAD_PARAM;
}
cublasStatus_t failing_cublas_call() {
  return CUBLAS_STATUS_INVALID_VALUE;
}
ncclResult_t failing_nccl_call() {
  return ncclInvalidArgument;
}

// Runs `fn`, expects st::Error, and returns its message.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no st::Error thrown";
  return "";
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(CudaCheck, CudaMacroNamesCallMessageAndLocation) {
  const std::string w = error_of([] { ST_CUDA_CHECK(failing_cuda_call()); });
  expect_contains(w, "failing_cuda_call()");
  expect_contains(w, cudaGetErrorString(cudaErrorInvalidValue));
  expect_contains(w, "check_test.cpp:");
}

TEST(CudaCheck, CudnnMacroNamesCallMessageAndLocation) {
  const std::string w = error_of([] { ST_CUDNN_CHECK(failing_cudnn_call()); });
  expect_contains(w, "failing_cudnn_call()");
  expect_contains(w, cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM));
  expect_contains(w, "check_test.cpp:");
}

TEST(CudaCheck, CublasMacroNamesCallMessageAndLocation) {
  const std::string w = error_of([] { ST_CUBLAS_CHECK(failing_cublas_call()); });
  expect_contains(w, "failing_cublas_call()");
  expect_contains(w, cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE));
  expect_contains(w, "check_test.cpp:");
}

TEST(CudaCheck, NcclMacroNamesCallMessageAndLocation) {
  const std::string w = error_of([] { ST_NCCL_CHECK(failing_nccl_call()); });
  expect_contains(w, "failing_nccl_call()");
  expect_contains(w, ncclGetErrorString(ncclInvalidArgument));
  expect_contains(w, "check_test.cpp:");
}

TEST(CudaCheck, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(ST_CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(ST_CUDNN_CHECK(CUDNN_STATUS_SUCCESS));
  EXPECT_NO_THROW(ST_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
  EXPECT_NO_THROW(ST_NCCL_CHECK(ncclSuccess));
}

TEST(CudaRuntime, BuiltAndDeviceCountNeverThrows) {
  EXPECT_TRUE(cuda_built());
  int n = -1;
  EXPECT_NO_THROW(n = cuda_device_count());
  EXPECT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(cuda::no_device_reason().empty());
    // Asking for a GPU that is not there is a clear error, "auto" falls back to the CPU.
    EXPECT_THROW(parse_device("cuda"), Error);
    EXPECT_TRUE(parse_device("auto").is_cpu());
  } else {
    EXPECT_TRUE(cuda::no_device_reason().empty());
    EXPECT_TRUE(parse_device("auto").is_cuda());
  }
}

TEST(CudaRuntime, RequireGpuHelperReadsEnvironment) {
  // The helper is what turns skips into failures; check its parsing, not the env of CI.
  const char* saved = std::getenv("SPARSETRAIN_REQUIRE_GPU");
  const std::string keep = saved ? saved : "";
  setenv("SPARSETRAIN_REQUIRE_GPU", "1", 1);
  EXPECT_TRUE(gpu_required());
  setenv("SPARSETRAIN_REQUIRE_GPU", "0", 1);
  EXPECT_FALSE(gpu_required());
  if (saved) {
    setenv("SPARSETRAIN_REQUIRE_GPU", keep.c_str(), 1);
  } else {
    unsetenv("SPARSETRAIN_REQUIRE_GPU");
  }
}

}  // namespace
}  // namespace st::test
