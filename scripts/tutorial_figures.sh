#!/usr/bin/env bash
# Runs every tutorial page's command (docs/tutorial/) and draws every figure of the pages.
#   scripts/tutorial_figures.sh BUILD_DIR [--page N]... [--quick] [--threads N] [--runs DIR] [--img DIR]
# --page N    only page N (repeatable; default every page, in order)
# --threads N every training run with N threads per rank instead of the pages' own
#             (--threads 2 on page 1, 1 elsewhere): the pages' numbers are ranges that
#             hold for 1 and 2 threads (tests/tutorial/claims.py checks them)
# --quick     CI length (tests/tutorial/pages_test.sh): fewer iterations; figures go to
#             RUNS/img instead of docs/tutorial/img unless --img is given
# --runs DIR  run folders (default runs/tutorial)
# --img DIR   where the PNGs go (default docs/tutorial/img)
# The pages show these commands with `build/` as BUILD_DIR. Pages 2, 4, 8 and 9 use the
# 100 Mbit/s link of scripts/netns_run.sh (page 9's bucket sweep 400 Mbit/s) when it can
# be made (root and `ip netns`); otherwise they run over shared memory and say so (set
# TUTORIAL_LINK=none to force that).
# Needs the sparsetrain, layers_test, comm_bench, allreduce_algorithms and tutorial_build_test
# targets, and
# /usr/bin/python3 with matplotlib (scripts/setup.sh).
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,17p' "$0" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
shift
pages=() quick=0 runs=runs/tutorial img="" threads=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --page) pages+=("$2"); shift 2 ;;
    --quick) quick=1; shift ;;
    --threads) threads=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --img) img=$2; shift 2 ;;
    *) echo "tutorial_figures: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ ${#pages[@]} -gt 0 ]] || pages=(1 2 3 4 5 6 7 8 9 10 11 12 13)
[[ -n $img ]] || { [[ $quick == 1 ]] && img=$runs/img || img=$root/docs/tutorial/img; }
mkdir -p "$runs" "$img"
runs=$(cd "$runs" && pwd)
img=$(cd "$img" && pwd)
cd "$root"

ST=$build/apps/sparsetrain
PY=/usr/bin/python3
export OMP_WAIT_POLICY=passive
MPI=(mpirun --allow-run-as-root --oversubscribe)
# Quick mode shortens every run; the long values are what the pages show.
long() { [[ $quick == 1 ]] && echo "$2" || echo "$1"; }
# Fashion-MNIST, a slice of it, one thread per rank, no progress lines.
# A linear learning-rate warm-up over the first quarter epoch keeps the first steps from
# blowing the loss up (without it, loss 2.5 -> 24 in the first 4 steps at --lr 0.05).
# Batches of 32 (page 10 also runs two micro-batches of 16: NODATA_B).
NODATA_B=(--dataset fashion-mnist --train-subset 6400 --test-subset 500 --eval-batches 4 --epochs 20
          --workers 1 -q --overwrite --warmup-epochs 0.25)
DATA=("${NODATA_B[@]}" -b 32)

# The 100 Mbit/s link: a private network namespace (root only), else shared memory.
LINK=()
if [[ ${TUTORIAL_LINK:-100mbit} != none && $(id -u) == 0 ]] && ip netns list > /dev/null 2>&1; then
  LINK=(scripts/netns_run.sh "${TUTORIAL_LINK:-100mbit}" --)
  MPI_LINK=("${MPI[@]}" --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
else
  echo "tutorial_figures: no network namespace here (needs root and ip netns): pages 2, 4 and 8" \
       "run over shared memory, without the 100 Mbit/s link" >&2
  MPI_LINK=("${MPI[@]}")
fi
# Which link pages 2, 4 and 8 used: tests/tutorial/claims.py checks the timing claims only
# with the link.
if [[ ${#LINK[@]} -gt 0 ]]; then echo "${TUTORIAL_LINK:-100mbit}"; else echo none; fi > "$runs/link.txt"
say() { echo "== tutorial page $1: $2"; }

page1() {
  say 1 "one process: gradient check, then training small_cnn"
  "$build/tests/layers_test" --gtest_filter='GradCheck.Linear*:GradCheck.Conv2d*' --gtest_brief=1
  "$ST" train --arch small_cnn "${DATA[@]}" --threads "${threads:-2}" --lr 0.05 \
    --max-iters "$(long 200 20)" --out "$runs/p1_one_process"
  $PY scripts/plot.py one_process="$runs/p1_one_process" --smooth 10 -o "$img/01-one-process.png"
}

# Naive: one bucket per parameter, all exchanged after backward.
NAIVE=(--no-overlap --first-bucket-mb 1e-9 --bucket-cap-mb 1e-9)
# ResNet-20 holds 1.03 MB of gradients: the default 1 MB first bucket would take nearly
# all of it, so pages 3 and 4 cut it finer to show the pipeline.
BUCKETS=(--first-bucket-mb 0.1 --bucket-cap-mb 0.25)
R20=(--arch resnet20 "${DATA[@]}" --threads "${threads:-1}" --lr 0.05 --trace-iters 3)

page2() {
  say 2 "two ranks, naive: one allreduce per parameter after backward"
  "${LINK[@]}" "${MPI_LINK[@]}" -np 2 "$ST" train "${R20[@]}" "${NAIVE[@]}" --print-buckets \
    --max-iters "$(long 15 10)" --trace "$runs/p2_naive.json" --out "$runs/p2_naive" \
    > "$runs/p2_naive_plan.txt" 2>&1
  head -4 "$runs/p2_naive_plan.txt"
  $PY scripts/timeline.py "$runs/p2_naive.json" -o "$img/02-naive-timeline.png" --steps 1 \
    --title "naive: 59 buckets (one per parameter), exchanged after backward, 2 ranks"
}

page3() {
  say 3 "buckets: the plan"
  "$ST" train "${R20[@]}" --print-buckets --max-iters 1 --out "$runs/p3_default" \
    > "$runs/p3_plan_default.txt" 2>&1
  "$ST" train "${R20[@]}" "${BUCKETS[@]}" --print-buckets --max-iters 1 --out "$runs/p3_fine" \
    > "$runs/p3_plan_fine.txt" 2>&1
  "$ST" train "${R20[@]}" "${NAIVE[@]}" --print-buckets --max-iters 1 --out "$runs/p3_naive" \
    > "$runs/p3_plan_naive.txt" 2>&1
  "$ST" train "${R20[@]}" --first-bucket-mb 0.1 --bucket-cap-mb 0.1 --print-buckets --max-iters 1 \
    --out "$runs/p3_cap01" > "$runs/p3_plan_cap01.txt" 2>&1
  grep bucket "$runs/p3_plan_fine.txt" | cut -c1-110
  $PY scripts/tutorial_plots.py plan "default (1 MB, 25 MB)=$runs/p3_plan_default.txt" \
    "--first-bucket-mb 0.1 --bucket-cap-mb 0.25=$runs/p3_plan_fine.txt" \
    "naive (1e-9, 1e-9)=$runs/p3_plan_naive.txt" -o "$img/03-bucket-plans.png"
}

page4() {
  say 4 "overlap: naive, bucketed after backward, bucketed with overlap"
  local iters
  iters=$(long 20 10)
  "${LINK[@]}" "${MPI_LINK[@]}" -np 2 "$ST" train "${R20[@]}" "${NAIVE[@]}" --max-iters "$iters" \
    --trace "$runs/p4_naive.json" --out "$runs/p4_naive" \
    | tee "$runs/p4_naive.summary.json"
  "${LINK[@]}" "${MPI_LINK[@]}" -np 2 "$ST" train "${R20[@]}" "${BUCKETS[@]}" --no-overlap \
    --max-iters "$iters" --trace "$runs/p4_no_overlap.json" --out "$runs/p4_no_overlap" \
    | tee "$runs/p4_no_overlap.summary.json"
  "${LINK[@]}" "${MPI_LINK[@]}" -np 2 "$ST" train "${R20[@]}" "${BUCKETS[@]}" \
    --max-iters "$iters" --trace "$runs/p4_overlap.json" --out "$runs/p4_overlap" \
    | tee "$runs/p4_overlap.summary.json"
  $PY scripts/timeline.py "$runs/p4_no_overlap.json" -o "$img/04-no-overlap-timeline.png" \
    --steps 1 --title "bucketed, --no-overlap: 7 buckets exchanged after backward, 2 ranks"
  $PY scripts/timeline.py "$runs/p4_overlap.json" -o "$img/04-overlap-timeline.png" \
    --steps 1 --title "bucketed with overlap (default): buckets leave while backward runs, 2 ranks"
  $PY scripts/tutorial_plots.py breakdown naive="$runs/p4_naive" \
    no-overlap="$runs/p4_no_overlap" overlap="$runs/p4_overlap" --warmup 5 \
    --title "ResNet-20, 2 ranks${LINK:+, 100 Mbit/s link}" -o "$img/04-step-breakdown.png" \
    | tee "$runs/p4_breakdown.jsonl"
}

SMALL=(--arch small_cnn "${DATA[@]}" --threads "${threads:-1}" --lr 0.05)

page5() {
  say 5 "Top-k with and without error feedback against Random-k and dense"
  local iters
  iters=$(long 200 20)
  for sp in none topk randomk; do
    "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --sparsifier "$sp" --density 0.01 \
      --max-iters "$iters" --out "$runs/p5_$sp"
  done
  for sp in topk randomk; do
    "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --sparsifier "$sp" --density 0.01 --sp ef=off \
      --max-iters "$iters" --out "$runs/p5_${sp}_no_ef"
  done
  # Error feedback with momentum: Random-k with the optimiser's momentum off, and DGC's
  # momentum correction (momentum inside the method, the optimiser's off).
  "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --sparsifier randomk --density 0.01 --momentum 0 \
    --max-iters "$iters" --out "$runs/p5_randomk_m0"
  "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --sparsifier dgc --density 0.01 --momentum 0 \
    --sp momentum=0.9 --max-iters "$iters" --out "$runs/p5_dgc_mc"
  $PY scripts/plot.py dense="$runs/p5_none" topk="$runs/p5_topk" \
    "topk, no EF=$runs/p5_topk_no_ef" randomk="$runs/p5_randomk" \
    "randomk, no EF=$runs/p5_randomk_no_ef" "randomk, momentum 0=$runs/p5_randomk_m0" \
    "dgc, momentum correction=$runs/p5_dgc_mc" --smooth 10 -o "$img/05-topk-randomk.png"
}

page6() {
  say 6 "gradient build-up: Top-k on 1, 2, 4 ranks; MiCRO"
  local iters
  iters=$(long 200 20)
  for np in 1 2 4; do
    "${MPI[@]}" -np $np "$ST" train "${SMALL[@]}" --sparsifier topk --density 0.01 \
      --max-iters "$iters" --out "$runs/p6_topk_np$np"
  done
  "${MPI[@]}" -np 4 "$ST" train "${SMALL[@]}" --sparsifier micro --density 0.01 \
    --max-iters "$iters" --out "$runs/p6_micro_np4"
  "${MPI[@]}" -np 4 "$ST" train "${SMALL[@]}" --sparsifier micro --density 0.01 \
    --sp up=1.1 down=0.9 --max-iters "$iters" --out "$runs/p6_micro_fast_np4"
  $PY scripts/plot_density.py topk_np1="$runs/p6_topk_np1" topk_np2="$runs/p6_topk_np2" \
    topk_np4="$runs/p6_topk_np4" micro_np4="$runs/p6_micro_np4" \
    micro_fast_np4="$runs/p6_micro_fast_np4" --smooth 5 -o "$img/06-build-up.png"
}

page7() {
  say 7 "ExDyna's load balance; SIDCo's fitted threshold"
  local iters
  iters=$(long 200 20)
  # MiCRO for the padding comparison is page 6's micro_fast_np4 run, with the same keys.
  [[ -f $runs/p6_micro_fast_np4/iterations.csv ]] || page6
  "${MPI[@]}" -np 4 "$ST" train "${SMALL[@]}" --sparsifier exdyna --density 0.01 \
    --sp up=1.1 down=0.9 fill=1 --max-iters "$iters" --out "$runs/p7_exdyna_np4"
  "${MPI[@]}" -np 4 "$ST" train "${SMALL[@]}" --sparsifier sidco-e --density 0.01 \
    --max-iters "$iters" --out "$runs/p7_sidco_e_np4"
  $PY scripts/plot_density.py micro_fast_np4="$runs/p6_micro_fast_np4" \
    exdyna_fill_np4="$runs/p7_exdyna_np4" sidco_e_np4="$runs/p7_sidco_e_np4" --smooth 5 \
    -o "$img/07-balance-sidco.png"
  $PY scripts/tutorial_plots.py balance micro_fast_np4="$runs/p6_micro_fast_np4" \
    exdyna_fill_np4="$runs/p7_exdyna_np4" sidco_e_np4="$runs/p7_sidco_e_np4" \
    -o "$img/07-padding.png" | tee "$runs/p7_balance.jsonl"
}

page8() {
  say 8 "scaling: fit the link, project to 256 workers"
  [[ -f $runs/p5_none/iterations.csv ]] || page5
  [[ -f $runs/p6_micro_fast_np4/iterations.csv ]] || page6
  "${LINK[@]}" "${MPI_LINK[@]}" -np 2 "$build/bench/comm_bench" --ops allreduce,allgatherv,padded \
    --min-bytes 65536 --max-bytes "$(long 4194304 1048576)" --budget "$(long 0.5 0.1)" \
    --max-reps 10 > "$runs/p8_comm_np2_link.jsonl"
  "$ST" sparsifiers --json > "$runs/p8_sparsifiers.json"
  # The measured runs: small_cnn (50,282 gradients) dense on 2 ranks (page 5), Top-k and
  # MiCRO on 4 ranks (page 6); their compute is kept, their exchange is modelled.
  $PY scripts/tutorial_plots.py scaling --comm "$runs/p8_comm_np2_link.jsonl" \
    --sparsifiers-json "$runs/p8_sparsifiers.json" --n 50282 --alpha-us 50 \
    --run dense="$runs/p5_none" topk="$runs/p6_topk_np4" micro="$runs/p6_micro_fast_np4" \
    --shared-compute dense -o "$img/08-scaling.png" | tee "$runs/p8_projection.jsonl"
}

page9() {
  say 9 "how an allreduce works: ring, tree, recursive doubling against MPI_Allreduce"
  local np
  rm -f "$runs/p9_algorithms.jsonl"
  for np in 2 4 8; do
    "${LINK[@]}" "${MPI_LINK[@]}" -np $np "$build/tests/allreduce_algorithms" --min-bytes 4096 \
      --max-bytes 262144 --reps "$(long 5 3)" >> "$runs/p9_algorithms.jsonl"
  done
  $PY scripts/tutorial_plots.py algos "$runs/p9_algorithms.jsonl" \
    --title "allreduce algorithms${LINK:+, 100 Mbit/s shared link}" -o "$img/09-allreduce.png"
  page9_buckets
}

# The bucket size measured: ResNet-20 on 2 ranks, one cap for both --first-bucket-mb and
# --bucket-cap-mb, from one bucket per parameter to one bucket for everything. At
# 400 Mbit/s the exchange takes about as long as backward, so overlap has something to hide.
page9_buckets() {
  local cap link=() caps=()
  [[ ${#LINK[@]} -eq 0 ]] || link=(scripts/netns_run.sh 400mbit --)
  for cap in 1e-9 0.01 0.1 0.25 0.5 25; do
    "${link[@]}" "${MPI_LINK[@]}" -np 2 "$ST" train --arch resnet20 "${DATA[@]}" --threads "${threads:-1}" \
      --lr 0.05 --first-bucket-mb $cap --bucket-cap-mb $cap --print-buckets \
      --max-iters "$(long 14 8)" --trace "$runs/p9_cap_$cap.json" --trace-iters 1 \
      --out "$runs/p9_cap_$cap" > "$runs/p9_cap_${cap}_plan.txt" 2>&1
    caps+=("$cap=$runs/p9_cap_$cap")
  done
  $PY scripts/plot_bucket_sweep.py "${caps[@]}" --warmup 4 -o "$img/09-bucket-sweep.png" \
    --title "ResNet-20, 2 ranks${LINK:+, 400 Mbit/s link}: step time against the bucket cap" \
    | tee "$runs/p9_bucket_sweep.jsonl"
}

page10() {
  say 10 "gradient accumulation, mixed precision and the 16-bit exchange"
  local iters
  iters=$(long 200 20)
  # The same 32 images per rank and step: one batch of 32, or two micro-batches of 16.
  "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --max-iters "$iters" --out "$runs/p10_fp32"
  "${MPI[@]}" -np 2 "$ST" train --arch small_cnn "${NODATA_B[@]}" --threads "${threads:-1}" --lr 0.05 -b 16 \
    --accum-steps 2 --max-iters "$iters" --out "$runs/p10_accum2"
  "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --precision bf16 --max-iters "$iters" \
    --out "$runs/p10_bf16"
  "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --precision fp16 --max-iters "$iters" \
    --out "$runs/p10_fp16"
  "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --comm-dtype bf16 --max-iters "$iters" \
    --out "$runs/p10_wire_bf16"
  $PY scripts/plot.py fp32="$runs/p10_fp32" "accumulate 2 x 16=$runs/p10_accum2" \
    "bf16 arithmetic=$runs/p10_bf16" "fp16 arithmetic=$runs/p10_fp16" \
    "bf16 exchange=$runs/p10_wire_bf16" --smooth 10 -o "$img/10-accum-precision.png"
}

# Every emulated kernel delayed by 2 ms (as a slower device would take): the host, which
# only queues, visibly runs ahead of the compute stream.
EMU_DELAY_US=2000

page11() {
  say 11 "the GPU pipeline on the emulated accelerator: streams, the ready event, the exchange"
  SPARSETRAIN_EMU_DELAY_US=$EMU_DELAY_US "${MPI[@]}" -np 2 "$ST" train "${SMALL[@]}" --device emu \
    --first-bucket-mb 0.05 --max-iters 8 --trace-iters 2 --trace "$runs/p11_emu.json" \
    --out "$runs/p11_emu"
  $PY scripts/timeline.py "$runs/p11_emu.json" -o "$img/11-emu-timeline.png" --steps 1 \
    --title "small_cnn on the emulated accelerator (--device emu, every kernel delayed 2 ms), 2 buckets, 2 ranks"
}

# Page 12: batches of 32 per rank on 1, 4 and 16 ranks for the same epochs, so a step of P
# ranks averages 32 P images and an epoch has 1/P of the steps: the 1-rank learning rate
# kept, multiplied by P, and multiplied by P after a one-epoch warm-up.
LR_BASE=0.005
LR_RUN=(--arch small_cnn --dataset fashion-mnist --train-subset 6400 --test-subset 1000 --workers 1
        -q --overwrite -b 32 --schedule constant)
page12() {
  say 12 "learning rate and the number of workers: linear scaling and warm-up"
  local epochs runs_arg=()
  epochs=$(long 3 2)
  "$ST" train "${LR_RUN[@]}" --threads "${threads:-1}" --epochs "$epochs" --lr "$LR_BASE" \
    --warmup-epochs 0.25 --out "$runs/p12_one_np1"
  runs_arg+=("1 rank, lr $LR_BASE=$runs/p12_one_np1")
  for P in 4 16; do
    local scaled
    scaled=$($PY -c "print($LR_BASE * $P)")
    "${MPI[@]}" -np "$P" "$ST" train "${LR_RUN[@]}" --threads "${threads:-1}" --epochs "$epochs" \
      --lr "$LR_BASE" --warmup-epochs 0.25 --out "$runs/p12_kept_np$P"
    "${MPI[@]}" -np "$P" "$ST" train "${LR_RUN[@]}" --threads "${threads:-1}" --epochs "$epochs" \
      --lr "$scaled" --out "$runs/p12_scaled_np$P"
    "${MPI[@]}" -np "$P" "$ST" train "${LR_RUN[@]}" --threads "${threads:-1}" --epochs "$epochs" \
      --lr "$scaled" --warmup-epochs 1 --out "$runs/p12_warmup_np$P"
    runs_arg+=("lr $LR_BASE kept=$runs/p12_kept_np$P" "lr x $P, no warm-up=$runs/p12_scaled_np$P"
               "lr x $P, 1 epoch warm-up=$runs/p12_warmup_np$P")
  done
  $PY scripts/tutorial_plots.py lr "${runs_arg[@]}" --ranks 4 16 -o "$img/12-lr-workers.png" \
    | tee "$runs/p12_lr.jsonl"
}

page13() {
  say 13 "sharding the optimiser state: ZeRO-1 against DDP's allreduce"
  # The exercise's exchange (docs/tutorial/diy/step6_sharded_optimizer.cpp) against plain
  # SGD on every parameter, on 4 ranks.
  "${MPI[@]}" -np 4 "$build/tests/tutorial_build_test" --gtest_filter='Build.Step6*' --gtest_brief=1
  "$ST" models --json --channels 1 > "$runs/p13_models.jsonl"
  $PY scripts/tutorial_plots.py zero "$runs/p13_models.jsonl" --arch small_cnn resnet20 \
    -o "$img/13-zero.png" | tee "$runs/p13_zero.jsonl"
}

for p in "${pages[@]}"; do
  start=$(date +%s%N)
  "page$p"
  echo "== tutorial page $p: $(( ($(date +%s%N) - start) / 1000000 )) ms"
done
