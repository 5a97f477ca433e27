# cmake -P: the default CUDA architectures (cmake/CudaArch.cmake) for a few machines.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/CudaArch.cmake)

function(expect caps want)
  st_cuda_architectures_for("${caps}" got)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "GPUs '${caps}': expected '${want}', got '${got}'")
  endif()
endfunction()

# One H100: its own machine code (and PTX), so nothing is JIT-compiled at start.
expect("9.0" "90")
# A node with A100s and an L4 (nvidia-smi prints one line per GPU).
expect("8.0;8.0;8.9" "80-real;89")
# No GPU at configure (a login node): machine code for every current architecture.
expect("" "75-real;80-real;86-real;89-real;90-real;100-real;120")
message(STATUS "cuda_arch_test: 3 cases passed")
