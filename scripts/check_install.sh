#!/usr/bin/env bash
# Installs a built tree into a fresh prefix and uses it the way a user would:
#   scripts/check_install.sh BUILD_DIR WORK_DIR STEP
# STEP install: `cmake --install` into WORK_DIR/prefix; the install tree must hold the
#               CLI, libraries, headers, package files and docs, and no path of the source
#               or build folder.
# STEP headers: tests/install/public_headers against the prefix (every public header on
#               its own, -Wall -Wextra -Werror).
# STEP model:   examples/custom_model, trained for 5 steps with MiCRO on 2 ranks.
# STEP sparsifier: examples/custom_sparsifier through the installed conformance helper, 2 ranks.
# STEP dataset: examples/custom_dataset, with find_package and again with pkg-config.
# ctest runs each step (tests/CMakeLists.txt, label install); the install step first.
set -euo pipefail
build=$(realpath "$1")
work=$(realpath -m "$2")
step=$3
src=$(realpath "$(dirname "$0")/..")
prefix=$work/prefix
jobs=${JOBS:-2}
mpirun_np2=(mpirun --allow-run-as-root --oversubscribe -np 2)
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive

# configure_and_build NAME SOURCE [cmake args...]: a consumer project against the prefix.
configure_and_build() {
  local name=$1 dir=$2
  shift 2
  rm -rf "$work/$name"
  cmake -S "$dir" -B "$work/$name" -DCMAKE_PREFIX_PATH="$prefix" "$@" >"$work/$name.configure.log" 2>&1 ||
    { cat "$work/$name.configure.log"; echo "check_install: configuring $dir failed"; exit 1; }
  cmake --build "$work/$name" -j "$jobs" >"$work/$name.build.log" 2>&1 ||
    { cat "$work/$name.build.log"; echo "check_install: building $dir failed"; exit 1; }
}

case $step in
install)
  rm -rf "$work"
  mkdir -p "$work"
  cmake --install "$build" --prefix "$prefix" >"$work/install.log"
  for f in bin/sparsetrain lib/libst_core.a lib/libst_train.a lib/libst_conformance.a \
    include/sparsetrain/core/tensor.h include/sparsetrain/core/version.h \
    include/sparsetrain/sparsify/testing/conformance.h \
    lib/cmake/sparsetrain/sparsetrainConfig.cmake \
    lib/cmake/sparsetrain/sparsetrainConfigVersion.cmake lib/pkgconfig/sparsetrain.pc \
    share/doc/sparsetrain/README.md share/doc/sparsetrain/docs/ARCHITECTURE.md; do
    [[ -e $prefix/$f ]] || { echo "check_install: $f missing from the install"; exit 1; }
  done
  # Internal headers stay out.
  for f in core/cuda/check.h comm/mpi_check.h sparsify/bulk/arg_checks.h data/jpeg_decode.h; do
    [[ ! -e $prefix/include/sparsetrain/$f ]] || { echo "check_install: internal $f installed"; exit 1; }
  done
  # No path of this machine's source or build folder, in any file (binaries included).
  if grep -rIl -e "$src" -e "$build" "$prefix" || grep -rl -a -e "$src/" -e "$build/" "$prefix"; then
    echo "check_install: the files above hold a source or build path"
    exit 1
  fi
  "$prefix/bin/sparsetrain" --version
  echo "check_install: $(find "$prefix" -type f | wc -l) files installed in $prefix"
  ;;
headers)
  # Unoptimised: the point is that each header compiles, and -O0 keeps it quick.
  configure_and_build public_headers "$src/tests/install/public_headers" -DCMAKE_BUILD_TYPE=
  "$work/public_headers/public_headers"
  ;;
model)
  configure_and_build custom_model "$src/examples/custom_model" -DCMAKE_BUILD_TYPE=Release
  cd "$work/custom_model"
  "${mpirun_np2[@]}" ./train_tiny_resnet --max-iters 5 --out "$work/custom_model/run"
  grep -q micro "$work/custom_model/run/config.json" ||
    { echo "check_install: the run's config.json does not name micro"; exit 1; }
  ;;
sparsifier)
  configure_and_build custom_sparsifier "$src/examples/custom_sparsifier" -DCMAKE_BUILD_TYPE=Release
  "${mpirun_np2[@]}" "$work/custom_sparsifier/check_masked_topk"
  ;;
dataset)
  configure_and_build custom_dataset "$src/examples/custom_dataset" -DCMAKE_BUILD_TYPE=Release
  cd "$work/custom_dataset"
  ./train_csv --data-dir "$work/custom_dataset/data" --max-iters 4
  PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
    configure_and_build custom_dataset_pc "$src/examples/custom_dataset" -DCMAKE_BUILD_TYPE=Release \
    -DSPARSETRAIN_VIA_PKGCONFIG=ON
  grep "Found sparsetrain, version" "$work/custom_dataset_pc.configure.log" ||
    { echo "check_install: pkg-config did not find sparsetrain"; exit 1; }
  cd "$work/custom_dataset_pc"
  ./train_csv --data-dir "$work/custom_dataset_pc/data" --max-iters 4
  ;;
*)
  echo "check_install: unknown step '$step' (install, headers, model, sparsifier, dataset)"
  exit 2
  ;;
esac
