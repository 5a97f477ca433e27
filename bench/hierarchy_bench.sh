#!/usr/bin/env bash
# Flat vs two-level vs planned exchange on 2 emulated hosts x 2 ranks (scripts/emulated_hosts.sh:
# shared memory inside a host, a rate-limited link between hosts). One JSON line per run:
#   {"model", "link", "method", "mode", "seed", "steps", "step_ms", "host_bytes",
#    "bytes_per_step", "loss"}
# step_ms is the mean wall time of the steps after the first five; host_bytes what both
# hosts sent each other over the run; bytes_per_step the same per step with the start-up
# taken out (a run of 2 steps subtracted, once per configuration: the model broadcast, the
# plan's probe); loss the training loss of the last step.
#   bench/hierarchy_bench.sh BUILD OUT bytes   ResNet-20 on Fashion-MNIST (BYTES_MODEL=lstm: the
#                                             LSTM) at 100 Mbit/s: topk and micro (seeds 1-3),
#                                             dense and exdyna (seed 1), flat vs two-level,
#                                             50 steps
#   bench/hierarchy_bench.sh BUILD OUT time    the LSTM (TIME_MODEL=resnet20: ResNet-20) at
#                                             100 Mbit/s: topk and micro, flat and two-level
#                                             alternating, three rounds (TIME_ROUNDS=N: N)
#                                             of 30 steps
#   RESNET_BATCH=N ...                        ResNet-20's batch per rank (default 32) in any of
#                                             these
#   PLAN_MODEL=resnet20 PLAN_LINK=none bench/hierarchy_bench.sh BUILD OUT plan-repeat
#                                             one model and link: dense, micro and the plan
#                                             alternating, three rounds of 40 steps
#   bench/hierarchy_bench.sh BUILD OUT plan    ResNet-20 and the LSTM at 100 Mbit/s, 1 Gbit/s
#                                             and unlimited: dense, micro, --plan auto (20 steps)
# Needs root (network namespaces). Results go to OUT/results.jsonl; runs to OUT/runs/.
set -euo pipefail
build=${1:?usage: hierarchy_bench.sh BUILD OUT bytes|time|plan}
out=${2:?usage: hierarchy_bench.sh BUILD OUT bytes|time|plan}
what=${3:?usage: hierarchy_bench.sh BUILD OUT bytes|time|plan}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$build/apps/sparsetrain
[[ -x $bin ]] || { echo "hierarchy_bench: no $bin (build the sparsetrain target)" >&2; exit 2; }
mkdir -p "$out/runs"
results=$out/results.jsonl

model_args() {  # model
  case $1 in
    resnet20) echo "--arch resnet20 --dataset fashion-mnist -b ${RESNET_BATCH:-32} --lr 0.05" ;;
    lstm) echo "--arch lstm --dataset fortunes --layers 2 --hidden 200 --emsize 200 --bptt 35 -b 20" ;;
  esac
}

mode_args() {  # mode
  case $1 in
    flat) echo "" ;;
    two-level) echo "--hierarchy node" ;;
    plan) echo "--plan auto" ;;
    two-level-plan) echo "--hierarchy node --plan auto" ;;
  esac
}

# run NAME MODEL LINK METHOD MODE SEED STEPS: one training run; prints host bytes
run() {
  local name=$1 model=$2 link=$3 method=$4 mode=$5 seed=$6 steps=$7
  local dir=$out/runs/$name rate=()
  [[ $link != none ]] && rate=(--rate "$link")
  local sp=(--sparsifier "$method" --density 0.01)
  [[ $method == dense ]] && sp=()
  rm -rf "$dir"
  # shellcheck disable=SC2046
  "$here/scripts/emulated_hosts.sh" "${rate[@]}" --bytes "$dir.bytes" 2 -- -np 4 \
    --map-by ppr:2:node -x OMP_NUM_THREADS=1 "$bin" train $(model_args "$model") \
    $(mode_args "$mode") "${sp[@]}" --epochs 1 --max-iters "$steps" --seed "$seed" --threads 1 \
    --workers 0 --eval-batches 1 -q --out "$dir" >"$dir.log" 2>&1 ||
    { echo "hierarchy_bench: $name failed; see $dir.log" >&2; tail -3 "$dir.log" >&2; return 1; }
  awk '{s += $2} END {print s}' "$dir.bytes"
}

# measure MODEL LINK METHOD MODE SEED STEPS [BASELINE]: one JSON line
measure() {
  local model=$1 link=$2 method=$3 mode=$4 seed=$5 steps=$6 baseline=${7:-}
  local name=${model}_${link}_${method}_${mode}_s${seed}_${steps}
  local bytes start=0 startfile=$out/runs/${model}_${link}_${method}_${mode}.start
  bytes=$(run "$name" "$model" "$link" "$method" "$mode" "$seed" "$steps")
  if [[ -n $baseline ]]; then
    [[ -s $startfile ]] || run "${name}_start" "$model" "$link" "$method" "$mode" "$seed" 2 >"$startfile"
    start=$(cat "$startfile")
  fi
  /usr/bin/python3 - "$out/runs/$name/iterations.csv" "$model" "$link" "$method" "$mode" "$seed" \
    "$steps" "$bytes" "$start" <<'PY' | tee -a "$results"
import csv, json, sys
path, model, link, method, mode, seed, steps, host_bytes, start = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
wall = [float(r["wall_s"]) for r in rows]
steps, host_bytes, start = int(steps), int(host_bytes), int(start)
print(json.dumps({
    "model": model, "link": link, "method": method, "mode": mode, "seed": int(seed),
    "steps": len(rows), "step_ms": round((wall[-1] - wall[4]) / (len(wall) - 5) * 1e3, 1),
    "host_bytes": host_bytes,
    "bytes_per_step": round((host_bytes - start) / (steps - 2)) if start else None,
    "loss": float(rows[-1]["loss"])}))
PY
}

case $what in
  bytes)
    for seed in 1 2 3; do
      for method in topk micro dense exdyna; do
        [[ $seed != 1 && ($method == dense || $method == exdyna) ]] && continue
        for mode in flat two-level; do
          measure "${BYTES_MODEL:-resnet20}" 100mbit $method $mode $seed 50 start
        done
      done
    done ;;
  time)
    for round in $(seq "${TIME_ROUNDS:-3}"); do
      for method in topk micro; do
        for mode in flat two-level; do measure "${TIME_MODEL:-lstm}" 100mbit $method $mode "$round" 30; done
      done
    done ;;
  plan-repeat)
    # The plan against dense and the method alone, alternating, three rounds of 40 steps
    # (for a figure whose spread is about the 5% it is judged by).
    for round in 1 2 3; do
      for mode in dense micro plan; do
        if [[ $mode == plan ]]; then measure "$PLAN_MODEL" "$PLAN_LINK" micro plan "$round" 40
        else measure "$PLAN_MODEL" "$PLAN_LINK" $mode flat "$round" 40; fi
      done
    done ;;
  plan)
    for model in resnet20 lstm; do
      for link in 100mbit 1gbit none; do
        for method in dense micro; do measure $model $link $method flat 1 20; done
        measure $model $link micro plan 1 20
      done
    done ;;
  *) echo "hierarchy_bench: unknown experiment '$what' (bytes, time or plan)" >&2; exit 2 ;;
esac
