#!/usr/bin/env bash
# The acceptance run for a machine with NVIDIA GPUs: what only a GPU can show. Made for a
# bare CUDA machine: the CUDA toolkit (nvcc, compute-sanitizer), cuDNN and NCCL possibly only
# as Python wheels (site-packages/nvidia/{cudnn,nccl}), CMake, a compiler, Python; no apt,
# no network, no Debian development packages, no datasets. Prints a verdict table (name,
# ok/FAIL/skip, detail) headed by the driver, CUDA, cuDNN and NCCL versions; exit 0 only
# when no line says FAIL.
#   scripts/gpu_check.sh [BUILD_DIR]                       (default build-gpu)
# Environment:
#   GPU_BUNDLE=DIR      the libraries and headers made by scripts/gpu_bundle.sh (default
#                       gpu-bundle/ at the repository root, when it exists; without one the
#                       build uses the system's packages). apt and scripts/setup.sh are
#                       never called.
#   GPU_CHECK_LOGS=DIR  where every log goes (default gpu-check-logs/<date-time>); printed
#                       first and never deleted.
#   GPU_CHECK_ARCHS=90  CUDA architectures (default: the visible GPUs' own, else 90).
#   GPU_CHECK_BUDGET=480  seconds for the whole run; a step that no longer fits is not
#                       started and its line says FAIL "not run".
#   GPU_CHECK_CPU_TWINS=1  without a GPU, still run the CPU half of every twin (timing).
#   GPU_CHECK_BUILD_LIMIT=300, GPU_CHECK_TWIN_LIMIT=90  the build's and each training
#                       run's time limit in seconds (raise both on a small machine).
# Only synthetic data: images from --dataset synthetic, a generated word corpus for the LSTM.
#
# Plan and time budget on one H200 with 16 cores (seconds; every command runs under
# `timeout`, the limits are in brackets; the whole run is capped at GPU_CHECK_BUDGET=480):
#   0. preflight: GPUs, bundle, CUDA/cuDNN/NCCL (toolkit or wheels)        ~2    [-]
#   1. configure (-G Ninja, -DSPARSETRAIN_WERROR=OFF, one architecture)    ~15   [120]
#      build only the CLI and the GPU test binaries, -j $(nproc)           ~90   [300]
#   2. smoke: mpirun -np 1 on the CPU, 2 steps (the MPI runtime works)     ~3    [60]
#   3. GPU tests: ctest -L gpu, SPARSETRAIN_REQUIRE_GPU=1, -j 4            ~60   [150]
#      while the CPU halves of step 4 run beside it (8 threads)            ~35   [90 each]
#   4. one process under mpirun -np 1, CUDA with --comm nccl against the CPU with
#      --comm mpi, 50 steps from one seed: dense, --sparsifier micro, --comm-dtype bf16,
#      --forward-overlap, the LSTM; loss curves within 2% on average      ~40   [90 each]
#   5. compute-sanitizer memcheck and synccheck over a 3-step MiCRO run, racecheck over
#      three device-op tests                                               ~90   [90/60/60]
#   6. 2 and 4 ranks (CUDA ranks against CPU ranks after one step, one GPU per rank, the
#      overlap share from a trace): skipped with the reason on one GPU.
#   Estimate on one H200: about 300 s (5 minutes) with a cold build, 210 s with a built
#   tree. Measured on a 2-core machine without a GPU (nice 19, beside another build): the
#   build took 513 s, 1031 s of compile and link steps, i.e. about 65 s of work per core
#   on 16 cores, 90 s with the dependency chain (the longest step took 28 s); the five CPU
#   halves took 119 s on 2 threads. The GPU figures are estimates, not measurements.
#
# Without a GPU it builds what it can (step 1), then stops with one line saying so and a
# non-zero exit; without cmake as well it stops before building.
set -uo pipefail
cd "$(dirname "$0")/.."

gpus=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  gpus=$(nvidia-smi -L | grep -c '^GPU')
fi
if ((gpus == 0)) && ! command -v cmake >/dev/null 2>&1; then
  echo "gpu_check: no GPU on this machine (nvidia-smi lists none); cmake not found, so nothing built"
  exit 1
fi

t0=$SECONDS
budget=${GPU_CHECK_BUDGET:-480}
build=${1:-build-gpu}
logs=${GPU_CHECK_LOGS:-gpu-check-logs/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
echo "gpu_check: logs in $logs"
declare -a verdict
pass=1
record() {  # record NAME ok|FAIL|skip DETAIL
  verdict+=("$(printf '%-28s %-4s %s' "$1" "$2" "$3")")
  [[ $2 != FAIL ]] || pass=0
  printf '%-28s %-4s %s\n' "$1" "$2" "$3" >>"$logs/verdict.txt"
}
left() { echo $((budget - (SECONDS - t0))); }
# run LIMIT LOG CMD...: CMD under `timeout`, at most LIMIT seconds and never past the
# budget; output into LOG. Returns CMD's status, 124 on the time limit, 125 when no time
# is left to start it.
run() {
  local limit=$1 log=$2 l
  shift 2
  l=$(left)
  ((l < limit)) && limit=$l
  if ((limit < 5)); then
    echo "not run: the ${budget} s budget was spent" >"$log"
    return 125
  fi
  echo "+ (timeout ${limit} s) $*" >"$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
}
why() {  # why STATUS LOG: a short reason for a failed run
  case $1 in
    124 | 137) echo "timed out (see $(basename "$2"))" ;;
    125) echo "not run: the ${budget} s budget was spent" ;;
    *) echo "exit $1: $(tail -n +2 "$2" | grep -m1 -iE 'error|fail|abort' | cut -c1-110)" ;;
  esac
}

# --- 0. preflight: bundle, CUDA, cuDNN, NCCL --------------------------------------------------
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DSPARSETRAIN_WERROR=OFF -DSPARSETRAIN_CUDA=ON)
include_flags=""
bundle=${GPU_BUNDLE:-}
[[ -z $bundle && -f gpu-bundle/env.sh ]] && bundle=gpu-bundle
if [[ -n $bundle ]]; then
  [[ -f $bundle/env.sh && -f $bundle/bundle.cmake ]] ||
    { echo "gpu_check: $bundle is not a bundle (scripts/gpu_bundle.sh makes one)"; exit 1; }
  # shellcheck disable=SC1091
  source "$bundle/env.sh"
  case $(uname -m):$GPU_BUNDLE_ARCH in
    x86_64:amd64 | aarch64:arm64) ;;
    *) echo "gpu_check: the bundle is for $GPU_BUNDLE_ARCH, this machine is $(uname -m)"; exit 1 ;;
  esac
  have_glibc=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  if [[ $(printf '%s\n%s\n' "$GPU_BUNDLE_GLIBC" "$have_glibc" | sort -V | head -n 1) != "$GPU_BUNDLE_GLIBC" ]]; then
    echo "gpu_check: the bundle needs glibc $GPU_BUNDLE_GLIBC, this machine has $have_glibc"
    exit 1
  fi
  cmake_args+=(-C "$GPU_BUNDLE_DIR/bundle.cmake" -DSPARSETRAIN_ONEDNN=OFF)
  include_flags="-isystem $GPU_BUNDLE_DIR/usr/include -isystem $GPU_BUNDLE_DIR/usr/include/$GPU_BUNDLE_TRIPLET"
  echo "gpu_check: libraries from the bundle $GPU_BUNDLE_DIR"
fi

cuda_root=${CUDA_HOME:-/usr/local/cuda}
nvcc=$cuda_root/bin/nvcc
[[ -x $nvcc ]] || nvcc=$(command -v nvcc || true)
[[ -n $nvcc ]] || { echo "gpu_check: nvcc not found (set CUDA_HOME)"; exit 1; }
cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
cmake_args+=(-DCMAKE_CUDA_COMPILER="$nvcc")
# cuDNN and NCCL: next to the toolkit, else from the Python wheels (nvidia-cudnn-cu13,
# nvidia-nccl-cu13: site-packages/nvidia/<name>/{include,lib}, libraries versioned only).
python=$(command -v python3 || true)
site_dirs() {
  [[ -n $python ]] && "$python" -c 'import sys; print("\n".join(p for p in sys.path if p))' 2>/dev/null
}
find_vendor() {  # find_vendor LIBNAME HEADER -> "LIBRARY INCLUDE_DIR" or nothing
  local lib=$1 header=$2 d f
  for d in "$cuda_root/lib64" "$cuda_root/lib" "$cuda_root/targets/$(uname -m)-linux/lib"; do
    f=$(ls "$d/lib$lib.so" 2>/dev/null | head -n 1)
    if [[ -n $f && -f $cuda_root/include/$header ]]; then
      echo "$f $cuda_root/include"
      return
    fi
  done
  while read -r d; do
    [[ -d $d/nvidia ]] || continue
    f=$(find "$d/nvidia" -maxdepth 4 -name "lib$lib.so.[0-9]*" 2>/dev/null | sort | head -n 1)
    if [[ -n $f && -f $(dirname "$f")/../include/$header ]]; then
      echo "$f $(cd "$(dirname "$f")/../include" && pwd)"
      return
    fi
  done < <(site_dirs)
}
read -r cudnn_lib cudnn_inc < <(find_vendor cudnn cudnn.h)
read -r nccl_lib nccl_inc < <(find_vendor nccl nccl.h)
[[ -n ${cudnn_lib:-} ]] || { echo "gpu_check: cuDNN not found in $cuda_root or a Python wheel (nvidia-cudnn-cu13)"; exit 1; }
[[ -n ${nccl_lib:-} ]] || { echo "gpu_check: NCCL not found in $cuda_root or a Python wheel (nvidia-nccl-cu13)"; exit 1; }
cmake_args+=(-DCUDNN_LIBRARY="$cudnn_lib" -DNCCL_LIBRARY="$nccl_lib")
for inc in "$cudnn_inc" "$nccl_inc"; do
  [[ $inc == "$cuda_root/include" ]] || include_flags+=" -isystem $inc"
done
export LD_LIBRARY_PATH="$(dirname "$cudnn_lib"):$(dirname "$nccl_lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "gpu_check: cuDNN $cudnn_lib, NCCL $nccl_lib"
if [[ -n $include_flags ]]; then
  cmake_args+=(-DCMAKE_C_FLAGS="$include_flags" -DCMAKE_CXX_FLAGS="$include_flags"
    -DCMAKE_CUDA_FLAGS="$include_flags")
fi

if [[ -n ${GPU_CHECK_ARCHS:-} ]]; then
  archs=$GPU_CHECK_ARCHS
elif ((gpus > 0)); then
  archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d ' .' | sort -u | paste -sd';')
else
  archs=90
fi
cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES="$archs")
command -v ninja >/dev/null 2>&1 && cmake_args+=(-G Ninja)

header_version() {  # header_version FILE PREFIX: MAJOR.MINOR.PATCH from #defines
  local f=$1 p=$2
  [[ -f $f ]] || { echo "?"; return; }
  awk -v p="$p" '$1 == "#define" && ($2 == p"MAJOR" || $2 == p"MINOR" || $2 == p"PATCHLEVEL" || $2 == p"PATCH") {v[$2] = $3}
    END {printf "%s.%s.%s", v[p"MAJOR"], v[p"MINOR"], (p"PATCHLEVEL" in v) ? v[p"PATCHLEVEL"] : v[p"PATCH"]}' "$f"
}
versions="CUDA $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
versions+=", cuDNN $(header_version "$cudnn_inc/cudnn_version.h" CUDNN_)"
versions+=", NCCL $(header_version "$nccl_inc/nccl.h" NCCL_)"
((gpus > 0)) && versions="driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1), $versions"

# --- 1. configure and build the CLI and the GPU test binaries ---------------------------------
# The GPU test targets: every st_add_test / st_add_mpi_test inside tests/CMakeLists.txt's
# if(ST_WITH_CUDA) block (mpi tests build <name>_test).
gpu_targets=$(sed -n '/^if(ST_WITH_CUDA)/,/^endif()/p' tests/CMakeLists.txt |
  sed -n -e 's/.*st_add_test(\([A-Za-z0-9_]*\).*/\1/p' -e 's/.*st_add_mpi_test(\([A-Za-z0-9_]*\).*/\1_test/p' |
  paste -sd' ')
targets="sparsetrain $gpu_targets"
run 120 "$logs/configure.log" cmake -S . -B "$build" "${cmake_args[@]}"
rc=$?
if ((rc != 0)); then
  tail -n 20 "$logs/configure.log"
  echo "gpu_check: configure failed ($(why $rc "$logs/configure.log")); log $logs/configure.log"
  exit 1
fi
# What CMake found, into found.txt; with a bundle, every bundled library must come from it.
grep -E '^(OPENBLAS_(INCLUDE_DIR|LIBRARY)|FFTW3_INCLUDE_DIR|FFTW3F_LIBRARY|BOOST_MATH_INCLUDE_DIR|XXHASH_(INCLUDE_DIR|LIBRARY)|STB_(INCLUDE_DIR|LIBRARY)|JPEG_(INCLUDE_DIR|LIBRARY_RELEASE)|ZLIB_(INCLUDE_DIR|LIBRARY_RELEASE)|GTest_DIR|CLI11_DIR|MPI_CXX_HEADER_DIR|MPI_mpi_LIBRARY|MPIEXEC_EXECUTABLE|CUDNN_LIBRARY|NCCL_LIBRARY|CUB_INCLUDE_DIR|CMAKE_CUDA_COMPILER):' \
  "$build/CMakeCache.txt" | sed 's/:[A-Z]*=/ = /' >"$logs/found.txt"
if [[ -n $bundle ]]; then
  outside=$(grep -vE '^(CUDNN_LIBRARY|NCCL_LIBRARY|CUB_INCLUDE_DIR|CMAKE_CUDA_COMPILER) ' "$logs/found.txt" |
    grep -v " = $GPU_BUNDLE_DIR/" | cut -d' ' -f1 | paste -sd' ')
  if [[ -n $outside ]]; then
    echo "gpu_check: found outside the bundle: $outside (see $logs/found.txt)"
    exit 1
  fi
  echo "gpu_check: $(grep -c " = $GPU_BUNDLE_DIR/" "$logs/found.txt") libraries and headers from the bundle (list in $logs/found.txt)"
fi
b0=$SECONDS
# shellcheck disable=SC2086
run "${GPU_CHECK_BUILD_LIMIT:-300}" "$logs/build.log" cmake --build "$build" -j "$(nproc)" --target $targets
rc=$?
build_s=$((SECONDS - b0))
if ((rc != 0)); then
  grep -m 5 -E 'error|Error' "$logs/build.log"
  echo "gpu_check: build failed after $build_s s ($(why $rc "$logs/build.log")); log $logs/build.log"
  exit 1
fi
n_targets=$(wc -w <<<"$targets")
record "build (CUDA $archs)" ok "$n_targets targets in $build_s s on $(nproc) cores"
bin=$build/apps/sparsetrain

mpi=(mpirun --oversubscribe --bind-to none -np 1)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
image=(--arch resnet20 --dataset synthetic --synthetic-size 3200 -b 64 --lr 0.05 --seed 1
  --epochs 1 --workers 1 -q --checkpoint-minutes 0)
text=$logs/text  # a generated word corpus for the LSTM (no dataset on the machine)
mkdir -p "$text"
python3 - "$text" <<'PY'
import random, sys
rng = random.Random(1)
words = [f"w{i}" for i in range(300)]
weights = [1.0 / (i + 1) for i in range(300)]
for name, n in (("train.txt", 60000), ("valid.txt", 6000), ("test.txt", 6000)):
    toks = rng.choices(words, weights, k=n)
    with open(f"{sys.argv[1]}/{name}", "w") as f:
        for i in range(0, n, 20):
            f.write(" ".join(toks[i:i + 20]) + "\n")
PY
lstm=(--arch lstm --dataset text --data-dir "$text" --layers 2 --hidden 200 --emsize 200
  --seed 1 --epochs 1 -q --checkpoint-minutes 0)
declare -A twin_args=(
  [dense]="${image[*]}"
  [micro]="${image[*]} --sparsifier micro --density 0.01"
  [comm-bf16]="${image[*]} --comm-dtype bf16"
  [forward-overlap]="${image[*]} --forward-overlap"
  [lstm]="${lstm[*]}"
)
twins=(dense micro comm-bf16 forward-overlap lstm)
# twin DEVICE NAME: 50 steps under mpirun -np 1 into $logs/NAME-DEVICE (CUDA over NCCL).
twin() {
  local device=$1 name=$2 comm=mpi threads=()
  [[ $device == cuda ]] && comm=nccl
  [[ $device == cpu ]] && threads=(--threads "${TWIN_THREADS:-8}")
  rm -rf "$logs/$name-$device"
  # shellcheck disable=SC2086
  run "${GPU_CHECK_TWIN_LIMIT:-90}" "$logs/$name-$device.log" "${mpi[@]}" "$bin" train --device "$device" --comm "$comm" \
    --max-iters 50 --out "$logs/$name-$device" "${threads[@]}" ${twin_args[$name]}
}
cpu_twins() {  # every CPU half, one after another; status per twin in $logs/NAME-cpu.rc
  local name rc
  for name in "${twins[@]}"; do
    twin cpu "$name"
    rc=$?
    echo "$rc" >"$logs/$name-cpu.rc"
  done
}

# --- 2. smoke: the MPI runtime and the binary on the CPU -------------------------------------
rm -rf "$logs/smoke"
run 60 "$logs/smoke.log" "${mpi[@]}" "$bin" train --device cpu --comm mpi --max-iters 2 \
  --out "$logs/smoke" --arch resnet20 --dataset synthetic --synthetic-size 128 -b 64 --seed 1 \
  --epochs 1 --workers 1 -q --checkpoint-minutes 0
rc=$?
if ((rc == 0)); then
  record "smoke (mpirun -np 1, CPU)" ok "2 iterations through $(command -v mpirun)"
else
  record "smoke (mpirun -np 1, CPU)" FAIL "$(why $rc "$logs/smoke.log")"
fi

if ((gpus == 0)); then
  if [[ ${GPU_CHECK_CPU_TWINS:-0} == 1 ]]; then
    c0=$SECONDS
    TWIN_THREADS=$(nproc) cpu_twins
    for name in "${twins[@]}"; do
      echo "gpu_check: CPU half $name: exit $(cat "$logs/$name-cpu.rc"), $(($(grep -c . "$logs/$name-cpu/iterations.csv" 2>/dev/null || echo 1) - 1)) steps" \
        >>"$logs/cpu_twins.txt"
    done
    echo "gpu_check: CPU halves of the twins in $((SECONDS - c0)) s (log $logs/cpu_twins.txt)" >>"$logs/cpu_twins.txt"
  fi
  echo "gpu_check: no GPU on this machine (nvidia-smi lists none); built $n_targets targets in $build_s s, stopping before the GPU checks"
  exit 1
fi

# --- 3. GPU tests, with the CPU halves of step 4 beside them ---------------------------------
cpu_twins &
cpu_job=$!
(
  cd "$build" || exit 1
  SPARSETRAIN_REQUIRE_GPU=1 run 150 "$logs/gpu_tests.log" ctest -L gpu -j 4 --timeout 120 --output-on-failure
)
rc=$?
summary=$(grep -E 'tests passed' "$logs/gpu_tests.log" || echo "no summary")
skipped=$(grep -c 'Skipped' "$logs/gpu_tests.log")
if ((rc == 0)) && grep -q 'tests passed, 0 tests failed' "$logs/gpu_tests.log"; then
  record "GPU tests (ctest -L gpu)" ok "$summary, $skipped skipped (too few GPUs)"
else
  record "GPU tests (ctest -L gpu)" FAIL "$summary; $(why $rc "$logs/gpu_tests.log")"
fi
wait "$cpu_job"

# --- 4. one process: CUDA over NCCL against the CPU ------------------------------------------
compare_losses() {  # compare_losses NAME: mean relative loss difference CPU vs CUDA
  python3 - "$logs/$1-cpu/iterations.csv" "$logs/$1-cuda/iterations.csv" <<'PY'
import csv, sys
a = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))]
b = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))]
n = min(len(a), len(b))
if n == 0:
    print("no iterations"); sys.exit(1)
d = sum(abs(x - y) / max(abs(x), 1e-6) for x, y in zip(a[:n], b[:n])) / n
print(f"{n} steps, mean relative loss difference {100 * d:.2f}%")
sys.exit(0 if n == 50 and d < 0.02 else 1)
PY
}
for name in "${twins[@]}"; do
  tag="np1-nccl-$name"
  rc=$(cat "$logs/$name-cpu.rc" 2>/dev/null || echo 125)
  if ((rc != 0)); then
    record "$tag" FAIL "CPU half: $(why "$rc" "$logs/$name-cpu.log")"
    continue
  fi
  twin cuda "$name"
  rc=$?
  if ((rc != 0)); then
    record "$tag" FAIL "CUDA half: $(why $rc "$logs/$name-cuda.log")"
    continue
  fi
  detail=$(compare_losses "$name" 2>&1) && record "$tag" ok "$detail" || record "$tag" FAIL "$detail"
done

# --- 5. compute-sanitizer -------------------------------------------------------------------
sanitizer=$(command -v compute-sanitizer || true)
for s in "$cuda_root/bin/compute-sanitizer" "$cuda_root/compute-sanitizer/compute-sanitizer"; do
  [[ -z $sanitizer && -x $s ]] && sanitizer=$s
done
small=(--arch resnet20 --dataset synthetic --synthetic-size 64 -b 16 --seed 1 --epochs 1
  --workers 1 -q --checkpoint-minutes 0 --max-iters 3 --sparsifier micro --density 0.01)
sanitize() {  # sanitize TOOL LIMIT WHAT CMD...
  local tool=$1 limit=$2 what=$3 rc
  shift 3
  rm -rf "$logs/sanitize-$tool"
  # OMP_WAIT_POLICY set: the CLI then does not re-execute itself to set it.
  OMP_WAIT_POLICY=passive run "$limit" "$logs/sanitize-$tool.log" "$sanitizer" --tool "$tool" \
    --error-exitcode 3 "$@"
  rc=$?
  if ((rc == 0)); then
    record "compute-sanitizer $tool" ok "$what: $(grep -h -m1 'ERROR SUMMARY' "$logs/sanitize-$tool.log")"
  elif ((rc == 3)); then
    record "compute-sanitizer $tool" FAIL "$what: $(grep -h -m1 'ERROR SUMMARY' "$logs/sanitize-$tool.log")"
  else
    record "compute-sanitizer $tool" FAIL "$what: $(why $rc "$logs/sanitize-$tool.log")"
  fi
}
if [[ -n $sanitizer ]]; then
  for tool in memcheck synccheck; do
    limit=90
    [[ $tool == synccheck ]] && limit=60
    sanitize "$tool" "$limit" "3-iteration MiCRO run" \
      "$bin" train --device cuda --out "$logs/sanitize-$tool" "${small[@]}"
  done
  sanitize racecheck 60 "cuda_ops_test selection and gather kernels" "$build/tests/cuda_ops_test" \
    --gtest_filter='CudaOpsTest.ThresholdSelectionMatchesCpu:CudaOpsTest.TopkMatchesCpu:CudaOpsTest.GatherAndScattersMatchCpu'
else
  record "compute-sanitizer" FAIL "not found in PATH or $cuda_root"
fi

# --- 6. several ranks (only where that many GPUs exist) --------------------------------------
mpin=(mpirun --oversubscribe --bind-to none)
[[ $(id -u) -eq 0 ]] && mpin+=(--allow-run-as-root)
ranks_case() {  # ranks_case NP NAME ARGS...: CPU ranks against CUDA ranks after one step
  local np=$1 name=$2 detail device comm rc
  shift 2
  local tag="np$np-$name"
  if ((gpus < np)); then
    record "$tag" skip "needs $np GPUs, this machine has $gpus"
    return
  fi
  for device in cpu cuda; do
    comm=mpi
    [[ $device == cuda ]] && comm=nccl
    run 90 "$logs/$tag-$device.log" "${mpin[@]}" -np "$np" "$bin" train --device "$device" \
      --comm "$comm" --max-iters 1 --out "$logs/$tag-$device" "${image[@]}" "$@"
    rc=$?
    ((rc == 0)) || { record "$tag" FAIL "$device: $(why $rc "$logs/$tag-$device.log")"; return; }
  done
  detail=$(python3 scripts/compare_checkpoints.py --rtol 1e-3 \
    "$logs/$tag-cpu/checkpoint.safetensors" "$logs/$tag-cuda/checkpoint.safetensors") &&
    record "$tag" ok "$detail" || record "$tag" FAIL "$detail"
}
for np in 2 4; do
  ranks_case "$np" dense
  ranks_case "$np" micro --sparsifier micro --density 0.01
  ranks_case "$np" comm-bf16 --comm-dtype bf16
  ranks_case "$np" warmup3 --sparsifier micro --dense-warmup-iters 3
done
if ((gpus >= 2)); then
  # Each rank on its own GPU: the compute processes nvidia-smi sees during a 2-rank run.
  run 90 "$logs/own-gpu.log" "${mpin[@]}" -np 2 "$bin" train --device cuda --comm nccl \
    --max-iters 200 --out "$logs/own-gpu" "${image[@]}" &
  job=$!
  sleep 20
  seen=$(nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader)
  wait "$job"
  per_gpu=$(awk -F, '{print $2}' <<<"$seen" | sort | uniq -c | awk '{print $1}' | sort -n | tail -n 1)
  procs=$(grep -c . <<<"$seen")
  if ((procs == 2)) && [[ $per_gpu == 1 ]]; then
    record "one GPU per rank" ok "2 processes on 2 different GPUs"
  else
    record "one GPU per rank" FAIL "nvidia-smi saw: $(tr '\n' ';' <<<"$seen")"
  fi
  run 90 "$logs/trace.log" "${mpin[@]}" -np 2 "$bin" train --device cuda --comm nccl \
    --max-iters 12 --trace "$logs/trace.json" --out "$logs/trace-run" "${image[@]}" \
    --sparsifier micro --density 0.01
  rc=$?
  if ((rc == 0)); then
    detail=$(python3 scripts/overlap_from_trace.py "$logs/trace.json") &&
      record "overlap (2 ranks, trace)" ok "$detail" ||
      record "overlap (2 ranks, trace)" FAIL "$detail"
  else
    record "overlap (2 ranks, trace)" FAIL "$(why $rc "$logs/trace.log")"
  fi
else
  record "one GPU per rank" skip "needs 2 GPUs, this machine has $gpus"
  record "overlap (2 ranks, trace)" skip "needs 2 GPUs, this machine has $gpus"
fi

echo "gpu_check on $(nvidia-smi -L | head -n 1) ($gpus GPUs), $versions, $(date -u +%Y-%m-%d)," \
  "$((SECONDS - t0)) s" | tee -a "$logs/verdict.txt"
printf '%s\n' "${verdict[@]}"
if ((pass)); then
  echo "verdict: every check passed (logs in $logs)"
else
  echo "verdict: FAILED (the lines above say which; logs in $logs)"
fi
((pass))
