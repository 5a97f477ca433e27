#!/usr/bin/env bash
# The one test command: install dependencies, configure (CUDA too when the toolkit
# exists), build with warnings as errors, run every test through ctest.
#   scripts/test.sh            # build dir: build/
#   BUILD_DIR=/tmp/b scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DSPARSETRAIN_WERROR=ON \
  -DSPARSETRAIN_CUDA="${SPARSETRAIN_CUDA:-AUTO}" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
grep -E "sparsetrain:" "$build_dir/configure.log" || true
cmake --build "$build_dir" -j "$jobs"
cd "$build_dir"
ctest --output-on-failure -j "${CTEST_JOBS:-1}" --timeout 600
