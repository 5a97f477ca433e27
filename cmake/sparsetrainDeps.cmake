# The libraries sparsetrain links, found from the Debian packages, as imported targets
# sparsetrain::<name>. The build includes this file (cmake/Dependencies.cmake) and so does
# the installed sparsetrainConfig.cmake, so a consumer finds them exactly as the build did.
# Before including it, set ST_WITH_ONEDNN and ST_WITH_CUDA (the build's choices); inside
# the package config, ST_DEPS_FROM_CONFIG is set and a missing dependency makes
# find_package(sparsetrain) fail with the package to install, instead of stopping CMake.

macro(_st_dep_missing what)
  if(ST_DEPS_FROM_CONFIG)
    set(sparsetrain_FOUND FALSE)
    set(sparsetrain_NOT_FOUND_MESSAGE "${what}")
    return()
  endif()
  message(FATAL_ERROR "${what}")
endmacro()

macro(_st_find_package)
  if(ST_DEPS_FROM_CONFIG)
    find_dependency(${ARGN})
  else()
    find_package(${ARGN} REQUIRED)
  endif()
endmacro()

_st_find_package(OpenMP COMPONENTS CXX)
_st_find_package(Threads)
_st_find_package(MPI COMPONENTS CXX)
_st_find_package(ZLIB)
_st_find_package(JPEG)

# sparsetrain::<name>: an imported interface target over a library file and include folder.
function(_st_imported name)
  cmake_parse_arguments(A "SYSTEM" "" "LIBS;INCLUDES" ${ARGN})
  if(TARGET sparsetrain::${name})
    return()
  endif()
  add_library(sparsetrain::${name} INTERFACE IMPORTED GLOBAL)
  if(A_INCLUDES)
    set_target_properties(sparsetrain::${name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${A_INCLUDES}")
    if(A_SYSTEM)
      set_target_properties(sparsetrain::${name} PROPERTIES
                            INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${A_INCLUDES}")
    endif()
  endif()
  if(A_LIBS)
    set_target_properties(sparsetrain::${name} PROPERTIES INTERFACE_LINK_LIBRARIES "${A_LIBS}")
  endif()
endfunction()

# OpenBLAS, OpenMP flavour (Debian libopenblas-openmp-dev): the CPU GEMM behind Linear,
# LSTM and convolution. The OpenMP build runs single-threaded inside our own parallel
# regions, so per-image GEMMs in a parallel loop do not oversubscribe the cores.
set(_st_blas_hint ${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp)
find_path(OPENBLAS_INCLUDE_DIR cblas.h PATHS /usr/include/${_st_blas_hint} NO_DEFAULT_PATH)
find_library(OPENBLAS_LIBRARY NAMES openblas PATHS /usr/lib/${_st_blas_hint} NO_DEFAULT_PATH)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
  _st_dep_missing("OpenBLAS (OpenMP build) not found: install libopenblas-openmp-dev")
endif()
_st_imported(openblas LIBS ${OPENBLAS_LIBRARY} INCLUDES ${OPENBLAS_INCLUDE_DIR})

# oneDNN (Debian libdnnl-dev): the faster CPU convolution, when the build chose it.
if(ST_WITH_ONEDNN)
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(DNNL_LIBRARY dnnl)
  if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
    _st_dep_missing("oneDNN not found: install libdnnl-dev")
  endif()
  _st_imported(dnnl LIBS ${DNNL_LIBRARY} INCLUDES ${DNNL_INCLUDE_DIR})
endif()

# Data formats: stb (libstb-dev) decodes PNG and friends; libjpeg-turbo reads JPEG.
find_path(STB_INCLUDE_DIR stb/stb_image.h)
find_library(STB_LIBRARY stb)
if(NOT STB_INCLUDE_DIR OR NOT STB_LIBRARY)
  _st_dep_missing("stb not found: install libstb-dev")
endif()
_st_imported(stb SYSTEM LIBS ${STB_LIBRARY} INCLUDES ${STB_INCLUDE_DIR})
_st_imported(jpeg LIBS JPEG::JPEG)

# Sparsifiers: FFTW3 in single precision (libfftw3-dev) for the FFT sparsifier's CPU
# transforms; Boost.Math (libboost-math-dev, headers only, private to the build) for SIDCo.
find_path(FFTW3_INCLUDE_DIR fftw3.h)
find_library(FFTW3F_LIBRARY fftw3f)
if(NOT FFTW3_INCLUDE_DIR OR NOT FFTW3F_LIBRARY)
  _st_dep_missing("FFTW3 (single precision, libfftw3f) not found: install libfftw3-dev")
endif()
_st_imported(fftw SYSTEM LIBS ${FFTW3F_LIBRARY} INCLUDES ${FFTW3_INCLUDE_DIR})
if(ST_DEPS_FROM_CONFIG)
  _st_imported(boost_math)  # compiled into the libraries; nothing to link
else()
  find_path(BOOST_MATH_INCLUDE_DIR boost/math/special_functions/gamma.hpp)
  if(NOT BOOST_MATH_INCLUDE_DIR)
    _st_dep_missing("Boost.Math not found: install libboost-math-dev")
  endif()
  _st_imported(boost_math SYSTEM INCLUDES ${BOOST_MATH_INCLUDE_DIR})
endif()

# Checksums of checkpoint data: XXH3-64 from xxHash (libxxhash-dev).
find_path(XXHASH_INCLUDE_DIR xxhash.h)
find_library(XXHASH_LIBRARY xxhash)
if(NOT XXHASH_INCLUDE_DIR OR NOT XXHASH_LIBRARY)
  _st_dep_missing("xxHash not found: install libxxhash-dev")
endif()
_st_imported(xxhash SYSTEM LIBS ${XXHASH_LIBRARY} INCLUDES ${XXHASH_INCLUDE_DIR})

# CUDA: the toolkit, cuDNN, NCCL and CUB (the build's cmake/Cuda.cmake chose it).
if(ST_WITH_CUDA)
  _st_find_package(CUDAToolkit)
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(CUB_INCLUDE_DIR cub/cub.cuh HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES cccl)
  if(NOT CUDNN_LIBRARY OR NOT NCCL_LIBRARY OR NOT CUB_INCLUDE_DIR)
    _st_dep_missing("cuDNN, NCCL or CUB not found next to the CUDA toolkit "
                    "(${CUDAToolkit_LIBRARY_DIR})")
  endif()
  _st_imported(cudnn LIBS ${CUDNN_LIBRARY})
  _st_imported(nccl LIBS ${NCCL_LIBRARY})
  _st_imported(cub INCLUDES ${CUB_INCLUDE_DIR})
endif()
