#!/usr/bin/env bash
# The acceptance run for a machine with NVIDIA GPUs: what only a GPU can show. Prints a
# one-screen verdict with the driver, CUDA, cuDNN and NCCL versions; exit 0 only when every
# line passed.
#   scripts/gpu_check.sh [BUILD_DIR]        (default build-gpu)
# Without a GPU it stops at once with one line saying so.
#
#  1. Builds with CUDA for the visible GPUs' own architectures (the build's default reads
#     them from nvidia-smi: no kernel is JIT-compiled at start).
#  2. Every GPU test (`ctest -L gpu`) with SPARSETRAIN_REQUIRE_GPU=1: a test skipped for
#     lack of a device fails; multi-GPU cases skip cleanly where fewer GPUs exist.
#  3. One process: 50 iterations of ResNet-20 on the CPU and on CUDA from one seed (dense,
#     micro, exdyna, sidco-e, topk, bf16, fp16) and the LSTM; loss curves within 2% on
#     average (cuDNN sums in another order than the CPU kernels; a wrong kernel is off by
#     far more).
#  4. 2 and 4 ranks under mpirun (where that many GPUs exist): dense, micro, --comm-dtype
#     bf16 and --dense-warmup-iters 3 after one step on CUDA ranks and on CPU ranks; every
#     parameter compared element by element (scripts/compare_checkpoints.py), and, during
#     a longer run, a check that every rank sits on its own GPU (nvidia-smi).
#  5. compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over the device-op
#     tests and a 3-iteration training run.
#  6. Overlap: a traced 2-rank run, the share of the exchange hidden behind backward
#     (scripts/overlap_from_trace.py).
set -uo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu_check: no GPU on this machine (nvidia-smi lists none); nothing to check"
  exit 1
fi

build=${1:-build-gpu}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -a verdict
pass=1
record() {  # record NAME ok|FAIL|skip DETAIL
  verdict+=("$(printf '%-30s %-4s %s' "$1" "$2" "$3")")
  [[ $2 != FAIL ]] || pass=0
}
gpus=$(nvidia-smi -L | grep -c '^GPU')
cuda_root=/usr/local/cuda
header_version() {  # header_version FILE PREFIX: MAJOR.MINOR.PATCH from #defines
  local f=$1 p=$2
  [[ -f $f ]] || { echo "?"; return; }
  awk -v p="$p" '$1 == "#define" && ($2 == p"MAJOR" || $2 == p"MINOR" || $2 == p"PATCHLEVEL" || $2 == p"PATCH") {v[$2] = $3}
    END {printf "%s.%s.%s", v[p"MAJOR"], v[p"MINOR"], (p"PATCHLEVEL" in v) ? v[p"PATCHLEVEL"] : v[p"PATCH"]}' "$f"
}
versions="driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)"
versions+=", CUDA $("$cuda_root/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
versions+=", cuDNN $(header_version "$cuda_root/include/cudnn_version.h" CUDNN_)"
versions+=", NCCL $(header_version "$cuda_root/include/nccl.h" NCCL_)"

# --- 1. build ---------------------------------------------------------------------------
scripts/setup.sh >/dev/null
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSETRAIN_WERROR=ON -DSPARSETRAIN_CUDA=ON \
  >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
archs=$(sed -n 's/.*architectures \([^)]*\)).*/\1/p' "$out/configure.log")
if cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1; then
  record "build (CUDA on)" ok "architectures $archs"
else
  tail -n 20 "$out/build.log"
  exit 1
fi

# --- 2. GPU tests -------------------------------------------------------------------------
(cd "$build" && SPARSETRAIN_REQUIRE_GPU=1 ctest -L gpu --timeout 900 >"$out/gpu_tests.log" 2>&1)
summary=$(grep -E 'tests passed' "$out/gpu_tests.log" || echo "no summary")
skipped=$(grep -c 'Skipped' "$out/gpu_tests.log")
if grep -q 'tests passed, 0 tests failed' "$out/gpu_tests.log"; then
  record "GPU tests (ctest -L gpu)" ok "$summary, $skipped skipped (too few GPUs)"
else
  record "GPU tests (ctest -L gpu)" FAIL "$summary (see $build/Testing/Temporary/LastTest.log)"
fi

bin="$build/apps/sparsetrain"
mpi=(mpirun --oversubscribe)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
image=(--arch resnet20 --dataset fashion-mnist -b 64 --lr 0.05 --seed 1 --epochs 1 --workers 1
  -q --checkpoint-minutes 0)

# --- 3. one process, CPU against CUDA --------------------------------------------------------
train() {  # train DEVICE NAME ARGS...: 50 iterations into $out/NAME-DEVICE
  local device=$1 name=$2
  shift 2
  "$bin" train --device "$device" --max-iters 50 --out "$out/$name-$device" "$@" \
    >"$out/$name-$device.log" 2>&1
}
compare_losses() {  # compare_losses NAME: mean relative loss difference CPU vs CUDA
  /usr/bin/python3 - "$out/$1-cpu/iterations.csv" "$out/$1-cuda/iterations.csv" <<'PY'
import csv, sys
a = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[1]))]
b = [float(r["loss"]) for r in csv.DictReader(open(sys.argv[2]))]
n = min(len(a), len(b))
if n == 0:
    print("no iterations"); sys.exit(1)
d = sum(abs(x - y) / max(abs(x), 1e-6) for x, y in zip(a[:n], b[:n])) / n
print(f"{n} iterations, mean relative loss difference {100 * d:.2f}%")
sys.exit(0 if n == 50 and d < 0.02 else 1)
PY
}
on_both() {  # on_both NAME ARGS...
  local name=$1 detail
  shift
  if train cpu "$name" "$@" && train cuda "$name" "$@"; then
    detail=$(compare_losses "$name") && record "$name" ok "$detail" || record "$name" FAIL "$detail"
  else
    record "$name" FAIL "$(tail -n 1 "$out/$name-cuda.log")"
  fi
}
for method in none micro exdyna sidco-e topk; do
  on_both "resnet20-$method" "${image[@]}" --sparsifier "$method"
done
for precision in bf16 fp16; do
  on_both "resnet20-$precision" "${image[@]}" --precision "$precision"
done
on_both lstm --arch lstm --seed 1 --epochs 1 -q --checkpoint-minutes 0

# --- 4. several ranks, CPU ranks against CUDA ranks after one step ---------------------------
ranks_case() {  # ranks_case NP NAME ARGS...
  local np=$1 name=$2 detail
  shift 2
  local tag="np$np-$name"
  if ((gpus < np)); then
    record "$tag" skip "needs $np GPUs, this machine has $gpus"
    return
  fi
  for device in cpu cuda; do
    if ! "${mpi[@]}" -np "$np" "$bin" train --device "$device" --max-iters 1 \
      --out "$out/$tag-$device" "${image[@]}" "$@" >"$out/$tag-$device.log" 2>&1; then
      record "$tag" FAIL "$device: $(grep -m1 'error' "$out/$tag-$device.log")"
      return
    fi
  done
  detail=$(/usr/bin/python3 scripts/compare_checkpoints.py --rtol 1e-3 \
    "$out/$tag-cpu/checkpoint.safetensors" "$out/$tag-cuda/checkpoint.safetensors") &&
    record "$tag" ok "$detail" || record "$tag" FAIL "$detail"
}
for np in 2 4; do
  ranks_case "$np" dense
  ranks_case "$np" micro --sparsifier micro --density 0.01
  ranks_case "$np" comm-bf16 --comm-dtype bf16
  ranks_case "$np" warmup3 --sparsifier micro --dense-warmup-iters 3
done
# Each rank on its own GPU: the compute processes nvidia-smi sees during a 2-rank run.
if ((gpus >= 2)); then
  "${mpi[@]}" -np 2 "$bin" train --device cuda --max-iters 200 --out "$out/own-gpu" "${image[@]}" \
    >"$out/own-gpu.log" 2>&1 &
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
else
  record "one GPU per rank" skip "needs 2 GPUs, this machine has $gpus"
fi

# --- 5. compute-sanitizer -----------------------------------------------------------------
sanitizer=$cuda_root/bin/compute-sanitizer
if [[ -x $sanitizer ]]; then
  for tool in memcheck racecheck synccheck initcheck; do
    ok=1
    for t in cuda_ops_test cuda_test; do
      "$sanitizer" --tool "$tool" --error-exitcode 3 "$build/tests/$t" \
        >"$out/sanitize-$tool-$t.log" 2>&1 || ok=0
    done
    "$sanitizer" --tool "$tool" --error-exitcode 3 "$bin" train --device cuda --max-iters 3 \
      --out "$out/sanitize-$tool" "${image[@]}" --sparsifier micro >"$out/sanitize-$tool.log" 2>&1 ||
      ok=0
    if ((ok)); then
      record "compute-sanitizer $tool" ok "device-op tests and a 3-iteration MiCRO run"
    else
      record "compute-sanitizer $tool" FAIL "$(grep -h -m1 'ERROR SUMMARY' "$out"/sanitize-"$tool"*.log | head -n 1)"
    fi
  done
else
  record "compute-sanitizer" FAIL "not found at $sanitizer"
fi

# --- 6. overlap from the trace ------------------------------------------------------------------
if ((gpus >= 2)); then
  if "${mpi[@]}" -np 2 "$bin" train --device cuda --max-iters 12 --trace "$out/trace.json" \
    --out "$out/trace-run" "${image[@]}" --sparsifier micro >"$out/trace.log" 2>&1; then
    detail=$(/usr/bin/python3 scripts/overlap_from_trace.py "$out/trace.json") &&
      record "overlap (2 ranks, trace)" ok "$detail" ||
      record "overlap (2 ranks, trace)" FAIL "$detail"
  else
    record "overlap (2 ranks, trace)" FAIL "$(grep -m1 error "$out/trace.log")"
  fi
else
  record "overlap (2 ranks, trace)" skip "needs 2 GPUs, this machine has $gpus"
fi

echo "gpu_check on $(nvidia-smi -L | head -n 1) ($gpus GPUs), $versions, $(date -u +%Y-%m-%d)"
printf '%s\n' "${verdict[@]}"
if [[ $pass -eq 1 ]]; then
  echo "verdict: every check passed"
else
  echo "verdict: FAILED (the lines above say which)"
fi
[[ $pass -eq 1 ]]
