#!/usr/bin/env bash
# The acceptance run for a machine with NVIDIA GPUs: builds with CUDA, runs every GPU test
# with SPARSETRAIN_REQUIRE_GPU=1 (a skip is then a failure: each device op against its CPU
# twin), then trains 50 iterations of ResNet-20 on the CPU and on CUDA from the same seed
# for dense, micro, exdyna, sidco-e and topk, dense in bf16 and fp16, and the LSTM
# language model, and compares the loss curves. Prints a one-screen verdict; exit 0 only when every line passed.
#   scripts/gpu_check.sh [BUILD_DIR]        (default build-gpu)
# Without a GPU it stops at once with one line saying so.
#
# Loss curves: the mean relative difference of the per-iteration losses over the 50
# iterations must be below 2% (cuDNN's algorithms sum in another order than the CPU
# kernels, and the differences grow over the steps; a wrong kernel is off by far more).
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
record() {  # record NAME ok|FAIL DETAIL
  verdict+=("$(printf '%-28s %-4s %s' "$1" "$2" "$3")")
  [[ $2 == ok ]] || pass=0
}

scripts/setup.sh >/dev/null
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSETRAIN_WERROR=ON -DSPARSETRAIN_CUDA=ON \
  >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
if cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1; then
  record "build (CUDA on)" ok ""
else
  tail -n 20 "$out/build.log"
  exit 1
fi

(cd "$build" && SPARSETRAIN_REQUIRE_GPU=1 ctest -R 'Cuda|cuda|Gpu|gpu' --timeout 600 \
  >"$out/gpu_tests.log" 2>&1)
summary=$(grep -E 'tests passed' "$out/gpu_tests.log" || echo "no summary")
if grep -q '100% tests passed' "$out/gpu_tests.log"; then
  record "GPU tests (device vs CPU)" ok "$summary"
else
  record "GPU tests (device vs CPU)" FAIL "$summary (see $build/Testing/Temporary/LastTest.log)"
fi

bin="$build/apps/sparsetrain"
# train DEVICE NAME ARGS...: 50 iterations into $out/NAME-DEVICE.
train() {
  local device=$1 name=$2
  shift 2
  "$bin" train --device "$device" --seed 1 --max-iters 50 --epochs 1 --workers 1 -q \
    --checkpoint-minutes 0 --out "$out/$name-$device" "$@" >"$out/$name-$device.log" 2>&1
}
compare() {  # compare NAME: mean relative loss difference CPU vs CUDA
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
# on_both NAME ARGS...: the same 50 iterations on the CPU and on CUDA, loss curves compared.
on_both() {
  local name=$1
  shift
  if train cpu "$name" "$@" && train cuda "$name" "$@"; then
    detail=$(compare "$name") && record "$name" ok "$detail" || record "$name" FAIL "$detail"
  else
    record "$name" FAIL "$(tail -n 1 "$out/$name-cuda.log")"
  fi
}
image=(--arch resnet20 --dataset fashion-mnist -b 64 --lr 0.05)
for method in none micro exdyna sidco-e topk; do
  on_both "resnet20-$method" "${image[@]}" --sparsifier "$method"
done
# Mixed precision: bf16 and fp16 (loss scaling) on both devices, the same 2% bound.
for precision in bf16 fp16; do
  on_both "resnet20-$precision" "${image[@]}" --precision "$precision"
done
on_both lstm --arch lstm

echo "gpu_check on $(nvidia-smi -L | head -n 1), $(date -u +%Y-%m-%d)"
printf '%s\n' "${verdict[@]}"
if [[ $pass -eq 1 ]]; then
  echo "verdict: every check passed"
else
  echo "verdict: FAILED (the lines above say which)"
fi
[[ $pass -eq 1 ]]
