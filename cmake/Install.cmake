# Install rules: `cmake --install build --prefix P` puts the sparsetrain CLI in P/bin, the
# static folder libraries in P/lib, the public headers in P/include/sparsetrain (included
# as <sparsetrain/core/tensor.h>, ...), the CMake package (find_package(sparsetrain CONFIG): targets
# sparsetrain::sparsetrain, sparsetrain::core, ..., sparsetrain::conformance), a pkg-config
# file and the documentation. CPack turns the same install into a Debian package.
include(CMakePackageConfigHelpers)

set(ST_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sparsetrain)

# The umbrella target: every folder library a training program needs.
add_library(st_all INTERFACE)
target_link_libraries(st_all INTERFACE st_train st_models st_optim st_data st_sparsify st_comm
                                       st_layers st_core)
set_target_properties(st_all PROPERTIES EXPORT_NAME sparsetrain)
add_library(sparsetrain::sparsetrain ALIAS st_all)

get_property(_st_libs GLOBAL PROPERTY ST_INSTALLED_LIBRARIES)
install(TARGETS st_all ${_st_libs} EXPORT sparsetrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# The CLI keeps the run path of the system libraries it links outside the default search
# path (OpenBLAS's OpenMP flavour, Open MPI), never a build folder.
set_target_properties(sparsetrain PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS sparsetrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The public headers: what a program that builds a model, reads data, trains, or adds a
# model, dataset or sparsifier includes, and the headers those include. Internal headers
# (CUDA kernels and runtime, MPI checks, decoders, selection kernels) stay out;
# tests/install/public_headers_test compiles every installed header on its own.
set(ST_PUBLIC_HEADERS
    core/build_info.h core/device.h core/dtype.h core/error.h core/host_device.h core/number_text.h core/ops.h core/channel_ops.h
    core/output_paths.h
    core/parallel.h core/rng.h core/safetensors.h core/shape.h core/storage.h core/tensor.h
    core/stream_sync.h core/timer.h core/upload.h core/kernels/conv_onednn.h core/kernels/half.h
    core/kernels/im2col.h core/kernels/math.h core/kernels/pointwise_ops.h
    layers/batchnorm2d.h layers/conv2d.h layers/dropout.h layers/embedding.h
    layers/flat_params.h layers/flatten.h layers/init.h layers/layer.h layers/linear.h
    layers/lstm.h layers/param.h layers/pooling.h layers/pointwise.h layers/precision.h
    layers/sequential.h layers/softmax_cross_entropy.h layers/concat.h layers/squeeze_excite.h
    models/blocks.h models/global_max_pool.h models/lstm_lm.h models/model_init.h
    models/googlenet.h models/inception_v4.h models/registry.h models/resnet_cifar.h
    models/senet.h models/resnet_imagenet.h models/shortcut_pad.h
    models/small_cnn.h models/vgg.h
    data/cifar.h data/dataset.h data/device_prefetch.h data/image.h data/image_folder.h
    data/loader.h data/mnist.h data/packed.h data/registry.h data/resize.h data/sample_rng.h
    data/sampler.h data/synthetic.h data/text_corpus.h data/transform.h
    optim/adam.h optim/adam_update.h optim/clip.h optim/lr_schedule.h optim/make_optimizer.h
    optim/optimizer.h optim/sgd.h optim/sgd_update.h
    comm/comm_worker.h comm/communicator.h comm/local_communicator.h comm/mpi_communicator.h
    comm/mpi_env.h comm/mpi_shared_segments.h comm/reducer.h comm/shared_segments.h
    sparsify/dense.h sparsify/micro.h sparsify/partition_math.h sparsify/quant_math.h
    sparsify/quant_spec.h sparsify/randomk.h sparsify/registry.h sparsify/sidco_moments.h
    sparsify/sp_keys.h sparsify/sparsifier.h sparsify/sparsify_hook.h sparsify/state_io.h
    sparsify/topk.h sparsify/transform_pieces.h
    sparsify/bulk/buffer.h sparsify/bulk/bulk_ops.h sparsify/bulk/cpu_ops.h
    sparsify/bulk/decorator.h sparsify/bulk/op_list.h sparsify/bulk/pass.h
    sparsify/bulk/timing_ops.h sparsify/testing/conformance.h
    train/checkpoint.h train/config.h train/config_check.h train/flags.h train/lm_trainer.h
    train/metrics.h train/run_folder.h train/trainer.h train/training_loop.h train/training_task.h)
# The public headers as the install has them (cmake/StageHeaders.cmake: project includes
# rewritten to <sparsetrain/...>), staged in the build tree whenever one changes.
set(_stage ${PROJECT_BINARY_DIR}/installed-include)
set(_staged)
set(_sources)
foreach(_h ${ST_PUBLIC_HEADERS} core/version.h)
  list(APPEND _staged ${_stage}/sparsetrain/${_h})
  if(_h STREQUAL "core/version.h")
    list(APPEND _sources ${PROJECT_BINARY_DIR}/generated/${_h})
  else()
    list(APPEND _sources ${PROJECT_SOURCE_DIR}/${_h})
  endif()
endforeach()
file(WRITE ${PROJECT_BINARY_DIR}/installed-headers.txt "${ST_PUBLIC_HEADERS};core/version.h")
add_custom_command(
  OUTPUT ${_staged}
  COMMAND ${CMAKE_COMMAND} -DST_SRC=${PROJECT_SOURCE_DIR}
          -DST_GENERATED=${PROJECT_BINARY_DIR}/generated -DST_OUT=${_stage}
          -DST_LIST=${PROJECT_BINARY_DIR}/installed-headers.txt
          -P ${PROJECT_SOURCE_DIR}/cmake/StageHeaders.cmake
  DEPENDS ${_sources} ${PROJECT_SOURCE_DIR}/cmake/StageHeaders.cmake
          ${PROJECT_BINARY_DIR}/installed-headers.txt
  COMMENT "Staging the public headers for the install (<sparsetrain/...> includes)")
add_custom_target(st_staged_headers ALL DEPENDS ${_staged})
install(DIRECTORY ${_stage}/sparsetrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The CMake package.
install(EXPORT sparsetrainTargets NAMESPACE sparsetrain:: DESTINATION ${ST_CMAKE_DIR})
configure_package_config_file(cmake/sparsetrainConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/sparsetrainConfig.cmake
                              INSTALL_DESTINATION ${ST_CMAKE_DIR})
# 0.x: a consumer asking for 0.1 takes any 0.1.z.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sparsetrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sparsetrainConfig.cmake
              ${PROJECT_BINARY_DIR}/sparsetrainConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/sparsetrainDeps.cmake
        DESTINATION ${ST_CMAKE_DIR})

# pkg-config: the same libraries in link order, then their dependencies as flags.
function(_st_pc_flags out)
  set(flags)
  foreach(lib ${ARGN})
    if(lib MATCHES "^/.*/lib([^/]+)\\.(so|a)(\\..*)?$")
      get_filename_component(dir ${lib} DIRECTORY)
      list(APPEND flags "-L${dir}" "-l${CMAKE_MATCH_1}")
      if(dir MATCHES "openblas|openmpi")  # outside the loader's default path
        list(APPEND flags "-Wl,-rpath,${dir}")
      endif()
    elseif(lib MATCHES "^-")
      list(APPEND flags ${lib})
    elseif(lib)
      list(APPEND flags "-l${lib}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  list(JOIN flags " " flags)
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()
set(_st_pc_deps ${MPI_CXX_LIBRARIES} ${OPENBLAS_LIBRARY} ${FFTW3F_LIBRARY} ${XXHASH_LIBRARY}
                ${STB_LIBRARY} ${JPEG_LIBRARIES} ${ZLIB_LIBRARIES})
if(ST_WITH_ONEDNN)
  list(APPEND _st_pc_deps ${DNNL_LIBRARY})
endif()
if(ST_WITH_CUDA)
  list(APPEND _st_pc_deps ${CUDA_cufft_LIBRARY} ${CUDA_cublas_LIBRARY} ${CUDA_cudart_LIBRARY}
              ${CUDNN_LIBRARY} ${NCCL_LIBRARY})
endif()
_st_pc_flags(ST_PC_DEP_LIBS ${_st_pc_deps})
set(_st_pc_cflags ${OpenMP_CXX_FLAGS} -pthread)
foreach(_d ${MPI_CXX_INCLUDE_DIRS})
  list(APPEND _st_pc_cflags "-I${_d}")
endforeach()
if(ST_WITH_CUDA)
  list(APPEND _st_pc_cflags -DSPARSETRAIN_WITH_CUDA=1)
  foreach(_d ${CUDAToolkit_INCLUDE_DIRS} ${CUB_INCLUDE_DIR})
    list(APPEND _st_pc_cflags "-I${_d}")
  endforeach()
endif()
list(REMOVE_DUPLICATES _st_pc_cflags)
list(JOIN _st_pc_cflags " " ST_PC_DEP_CFLAGS)
file(RELATIVE_PATH ST_PC_UP /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" ST_PC_UP "${ST_PC_UP}")
configure_file(cmake/sparsetrain.pc.in ${PROJECT_BINARY_DIR}/sparsetrain.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/sparsetrain.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Documentation and the examples built against an install.
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# Debian package: `cpack -G DEB` in the build folder. Depends: the runtime packages of the
# shared libraries the CLI links, computed by dpkg-shlibdeps; Recommends: the development
# packages a program built against the installed libraries links, mpirun, and the dataset
# `sparsetrain train` reads by default.
set(CPACK_PACKAGE_NAME sparsetrain)
set(CPACK_PACKAGE_VENDOR "sparsetrain developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "sparsetrain developers <sparsetrain@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps names the virtual libopenblas0; the CLI's run path wants the OpenMP flavour.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0-openmp")
if(ST_WITH_CUDA)
  # The toolkit's libraries (CUDA runtime, cuBLAS, cuDNN, NCCL) come from NVIDIA's
  # installer, not a Debian package: dpkg-shlibdeps is told where they are.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
endif()
set(_st_recommends openmpi-bin libopenmpi-dev libopenblas-openmp-dev libfftw3-dev libxxhash-dev
                   libstb-dev libjpeg62-turbo-dev zlib1g-dev dataset-fashion-mnist)
if(ST_WITH_ONEDNN)
  list(APPEND _st_recommends libdnnl-dev)
endif()
list(JOIN _st_recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
include(CPack)
