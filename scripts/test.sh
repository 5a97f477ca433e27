#!/usr/bin/env bash
# The one test command: install dependencies, configure (CUDA too when the toolkit
# exists), build with warnings as errors, run every test through ctest.
#   scripts/test.sh            # build dir: build/
#   BUILD_DIR=/tmp/b scripts/test.sh
# With clang installed it first builds a second tree, <build>-sanitize (clang,
# AddressSanitizer + UndefinedBehaviorSanitizer, CUDA off), holding only the core, data,
# comm and sparsify test binaries and the fuzz targets (target hostile_input); the main
# ctest then runs those binaries and each fuzz target over its corpus plus FUZZ_RUNS (default
# 4000) inputs from a fixed seed, at most FUZZ_SECONDS (default 20) each.
# SANITIZE=0 skips it.
# The ctest entries labelled install (scripts/check_install.sh) install the build into
# <build>/install-check/prefix, build every project in examples/ and a header-only consumer
# against it, and run them (the custom model with MiCRO on 2 ranks, the custom sparsifier
# through the installed conformance checks).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
san_dir=""
if [[ "${SANITIZE:-1}" == 1 ]] && command -v clang++ >/dev/null; then
  san_dir=$(realpath -m "${SANITIZE_BUILD_DIR:-$build_dir-sanitize}")
  mkdir -p "$san_dir"
  cmake -S . -B "$san_dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DSPARSETRAIN_CUDA=OFF \
    -DSPARSETRAIN_ONEDNN=OFF -DSPARSETRAIN_SANITIZE=ON -DSPARSETRAIN_FUZZ=ON \
    -DSPARSETRAIN_WERROR=ON >"$san_dir/configure.log" 2>&1 ||
    { cat "$san_dir/configure.log"; exit 1; }
  cmake --build "$san_dir" -j "$jobs" --target hostile_input
fi
mkdir -p "$build_dir"
# Without a GPU the CUDA tree is a compile check (nothing runs it): one architecture is
# enough; with a GPU the build's default takes the visible GPUs' own (cmake/CudaArch.cmake).
cuda_arch=()
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  cuda_arch=(-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-80}")
fi
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DSPARSETRAIN_WERROR=ON "${cuda_arch[@]}" \
  -DSPARSETRAIN_CUDA="${SPARSETRAIN_CUDA:-AUTO}" -DSPARSETRAIN_SANITIZE_BUILD="$san_dir" \
  >"$build_dir/configure.log" 2>&1 || { cat "$build_dir/configure.log"; exit 1; }
grep -E "sparsetrain:" "$build_dir/configure.log" || true
cmake --build "$build_dir" -j "$jobs"
cd "$build_dir"
ctest --output-on-failure -j "${CTEST_JOBS:-1}" --timeout 600
