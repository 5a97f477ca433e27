# st_warnings: the flags every sparsetrain target compiles with.
add_library(st_warnings INTERFACE)
target_compile_options(st_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unknown-pragmas>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SPARSETRAIN_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SPARSETRAIN_NATIVE}>>:-march=native>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SPARSETRAIN_WERROR}>>:-Werror=all-warnings>)

# st_add_folder_library(name folder SOURCES... CUDA_SOURCES... DEPS...)
function(st_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;CUDA_SOURCES;NO_CUDA_SOURCES;DEPS" ${ARGN})
  set(srcs ${A_SOURCES})
  if(ST_WITH_CUDA)
    list(APPEND srcs ${A_CUDA_SOURCES})
  else()
    list(APPEND srcs ${A_NO_CUDA_SOURCES})
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${A_DEPS} PRIVATE st_warnings)
  if(ST_WITH_CUDA)
    set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                             POSITION_INDEPENDENT_CODE ON)
    target_compile_definitions(${name} PUBLIC SPARSETRAIN_WITH_CUDA=1)
  endif()
endfunction()
