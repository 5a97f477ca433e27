// GPU tests run where a CUDA device exists and skip with the runtime's reason where
// none does. CI machines with a GPU set SPARSETRAIN_REQUIRE_GPU=1, which turns the skip
// into a failure so a broken driver cannot pass as "skipped".
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cuda/runtime.h"
#include "core/device.h"

namespace st::test {

inline bool gpu_required() {
  const char* v = std::getenv("SPARSETRAIN_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// "" when a device is usable, else why not.
inline std::string cuda_skip_reason() {
  if (cuda_device_count() > 0) return "";
  const std::string reason = cuda::no_device_reason();
  return reason.empty() ? "cuda_device_count() == 0" : reason;
}

}  // namespace st::test

// First statement of every GPU test.
#define ST_REQUIRE_CUDA_DEVICE()                                                        \
  do {                                                                                  \
    const std::string st_reason_ = ::st::test::cuda_skip_reason();                      \
    if (!st_reason_.empty()) {                                                          \
      if (::st::test::gpu_required())                                                   \
        GTEST_FAIL() << "SPARSETRAIN_REQUIRE_GPU=1 but no CUDA device: " << st_reason_; \
      GTEST_SKIP() << "no CUDA device: " << st_reason_;                                 \
    }                                                                                   \
  } while (0)
