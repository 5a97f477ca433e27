# st_warnings: the flags every sparsetrain target compiles with.
add_library(st_warnings INTERFACE)
target_compile_options(st_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unknown-pragmas>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SPARSETRAIN_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SPARSETRAIN_NATIVE}>>:-march=native>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SPARSETRAIN_WERROR}>>:-Werror=all-warnings>)

# st_add_library(name SOURCES... CUDA_SOURCES... NO_CUDA_SOURCES... DEPS...): one folder's
# static library, installed and exported as sparsetrain::<name without st_>
# (cmake/Install.cmake); headers are included as "folder/file.h" from the source root
# in the build, and as <sparsetrain/folder/file.h> from include/ in an install.
function(st_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;CUDA_SOURCES;NO_CUDA_SOURCES;DEPS" ${ARGN})
  set(srcs ${A_SOURCES})
  if(ST_WITH_CUDA)
    list(APPEND srcs ${A_CUDA_SOURCES})
  else()
    list(APPEND srcs ${A_NO_CUDA_SOURCES})
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                            $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${name} PUBLIC ${A_DEPS} PRIVATE $<BUILD_INTERFACE:st_warnings>)
  target_compile_features(${name} PUBLIC cxx_std_20)  # consumers of the install too
  string(REGEX REPLACE "^st_" "" export_name ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${export_name})
  set_property(GLOBAL APPEND PROPERTY ST_INSTALLED_LIBRARIES ${name})
  if(ST_WITH_CUDA)
    set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                             POSITION_INDEPENDENT_CODE ON)
    target_compile_definitions(${name} PUBLIC SPARSETRAIN_WITH_CUDA=1)
  endif()
endfunction()
