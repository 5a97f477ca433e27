# The PyTorch extension's dependencies: Torch (the Debian libtorch config, or the one the
# Python package names) and pybind11. Sets ST_WITH_TORCH; without them, one configure
# line says why and the extension and its tests are skipped.
set(ST_WITH_TORCH OFF)
if(SPARSETRAIN_TORCH)
  # The interpreter that imports torch: the first python3 on PATH that does, else the
  # system one (Debian's python3-torch); -DPython3_EXECUTABLE=... picks another.
  if(NOT Python3_EXECUTABLE)
    find_program(_st_path_python python3)
    foreach(_st_py ${_st_path_python} /usr/bin/python3)
      execute_process(COMMAND ${_st_py} -c "import torch" RESULT_VARIABLE _st_rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(_st_rc EQUAL 0)
        set(Python3_EXECUTABLE ${_st_py} CACHE FILEPATH "The Python that imports torch")
        break()
      endif()
    endforeach()
  endif()
  set(PYTHON_EXECUTABLE ${Python3_EXECUTABLE})
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  if(Python3_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
                    OUTPUT_VARIABLE _st_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    list(APPEND CMAKE_PREFIX_PATH ${_st_torch_prefix})
  endif()
  find_package(Torch QUIET)
  find_package(pybind11 CONFIG QUIET)
  find_library(ST_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib)
  if(Python3_FOUND AND Torch_FOUND AND pybind11_FOUND AND ST_TORCH_PYTHON_LIBRARY)
    set(ST_WITH_TORCH ON)
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
    message(STATUS "sparsetrain_torch: Torch ${Torch_VERSION}, pybind11 ${pybind11_VERSION}, ${Python3_EXECUTABLE}")
  else()
    message(STATUS "sparsetrain_torch: skipped (needs Python 3 with torch, libtorch and pybind11; found python=${Python3_FOUND} torch=${Torch_FOUND} pybind11=${pybind11_FOUND})")
  endif()
else()
  message(STATUS "sparsetrain_torch: off (SPARSETRAIN_TORCH=OFF)")
endif()
