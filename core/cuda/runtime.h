// Device discovery for the CUDA build (core/device.h declares cuda_built and
// cuda_device_count for every build).
#pragma once

#include <string>

namespace st::cuda {

// Why no device is usable ("" when at least one is): the CUDA runtime's own message,
// e.g. "CUDA driver version is insufficient" or "no CUDA-capable device is detected".
std::string no_device_reason();

// The device a CUDA pointer lives on (unified addressing); throws for host pointers.
int device_of(const void* ptr);

}  // namespace st::cuda
