# System dependencies, all from Debian packages (scripts/setup.sh installs them). The
# libraries the sparsetrain libraries link are found in cmake/sparsetrainDeps.cmake, which
# the installed package config runs again for a consumer; this file decides the optional
# ones and finds what only the build needs (GoogleTest).
find_package(GTest REQUIRED)

# oneDNN (Debian libdnnl-dev): the faster CPU convolution. Optional; without it
# Conv2d uses its im2col + GEMM reference path.
set(SPARSETRAIN_ONEDNN AUTO CACHE STRING "Use oneDNN for CPU convolution: ON, OFF or AUTO")
set(ST_WITH_ONEDNN OFF)
if(NOT SPARSETRAIN_ONEDNN STREQUAL "OFF")
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(DNNL_LIBRARY dnnl)
  if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY)
    set(ST_WITH_ONEDNN ON)
    message(STATUS "sparsetrain: oneDNN convolution ON (${DNNL_LIBRARY})")
  elseif(SPARSETRAIN_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "SPARSETRAIN_ONEDNN=ON but oneDNN was not found: install libdnnl-dev")
  else()
    message(STATUS "sparsetrain: oneDNN not found, CPU convolution uses im2col + GEMM")
  endif()
endif()

# JPEG through libjpeg-turbo's libjpeg API (libjpeg62-turbo-dev): needs 2.0 or newer for
# jpeg_crop_scanline and jpeg_skip_scanlines (partial decoding).
find_package(JPEG REQUIRED)
include(CheckSymbolExists)
set(CMAKE_REQUIRED_INCLUDES ${JPEG_INCLUDE_DIRS})
set(CMAKE_REQUIRED_LIBRARIES ${JPEG_LIBRARIES})
check_symbol_exists(jpeg_crop_scanline "stdio.h;jpeglib.h" ST_HAVE_JPEG_CROP_SCANLINE)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_LIBRARIES)
if(NOT ST_HAVE_JPEG_CROP_SCANLINE)
  message(FATAL_ERROR "libjpeg-turbo >= 2.0 not found: install libjpeg62-turbo-dev "
                      "(scripts/setup.sh does)")
endif()
