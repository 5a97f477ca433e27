# The GPU architectures the CUDA sources are compiled for, when the configure line does not
# set CMAKE_CUDA_ARCHITECTURES. A binary without machine code for its GPU has every kernel
# JIT-compiled from PTX when each process starts (minutes on a new GPU, and again in every
# rank), so the default is machine code for the GPUs this machine shows (nvidia-smi), and,
# on a build machine without a GPU, for each architecture current CUDA supports, with
# PTX of the newest for GPUs that come later.

# Compute capabilities as nvidia-smi prints them ("8.0", "9.0") -> a CUDA_ARCHITECTURES list.
function(st_cuda_architectures_for caps out_var)
  set(archs)
  foreach(cap IN LISTS caps)
    string(STRIP "${cap}" cap)
    if(cap MATCHES "^([0-9]+)\\.([0-9]+)$")
      list(APPEND archs "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES archs)
  if(NOT archs)
    # Turing to Blackwell: the architectures nvcc 13 compiles for.
    set(archs 75 80 86 89 90 100 120)
  endif()
  list(SORT archs COMPARE NATURAL)
  list(POP_BACK archs newest)
  set(result)
  foreach(a IN LISTS archs)
    list(APPEND result "${a}-real")
  endforeach()
  list(APPEND result "${newest}")  # machine code and PTX
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

# The compute capabilities of the GPUs visible now ("" without a GPU or nvidia-smi).
function(st_visible_gpu_caps out_var)
  set(caps)
  find_program(ST_NVIDIA_SMI nvidia-smi)
  if(ST_NVIDIA_SMI)
    execute_process(COMMAND ${ST_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0)
      string(REPLACE "\n" ";" caps "${out}")
    endif()
  endif()
  set(${out_var} "${caps}" PARENT_SCOPE)
endfunction()
