#!/usr/bin/env bash
# Overlap benchmark: 2 ranks over a rate-limited loopback (MPI over TCP only),
# ResNet-20 on synthetic data, bucketed overlap vs exchanging everything after backward.
# The two modes run alternately REPEATS times (a shared machine's load then hits both
# alike). Prints JSON lines (scripts/overlap_report.py): per mode the median iteration
# time, backward and exposed communication over all runs' iterations after 10 warm-up
# ones, and the job's CPU seconds per iteration and rank; then the hidden fraction
# (1 - exposed with overlap / exposed without), the saved fraction (iteration time saved
# / exposed communication without overlap) and the speedup.
#   bench/overlap_bench.sh BUILD_DIR [RATE=50mbit] [ITERS=40] [REPEATS=1] [BATCH=64]
# BATCH is per rank. Overlap can hide at most the communication that fits into backward:
# when backward is shorter than the exchange, the saved fraction is bounded by about
# backward / exchange (docs/RESULTS.md, "Overlap benchmark").
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
rate=${2:-50mbit}
iters=${3:-40}
repeats=${4:-1}
batch=${5:-64}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir "$out/time"
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl tcp,self
     --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
args=(train --arch resnet20 --dataset synthetic --synthetic-size 100000 -b "$batch" --threads 1
      --workers 1 --max-iters "$iters" --eval-batches 1 -q --first-bucket-mb 0.05
      --bucket-cap-mb 0.2)
for ((i = 0; i < repeats; i++)); do
  for mode in overlap no-overlap; do
    extra=()
    [[ $mode == no-overlap ]] && extra=(--no-overlap)
    /usr/bin/time -f "%U %S" -o "$out/time/$mode.$i" \
      scripts/netns_run.sh "$rate" -- "${mpi[@]}" "$build/apps/sparsetrain" "${args[@]}" \
      "${extra[@]}" --out "$out/$mode.$i" >/dev/null 2>&1
  done
done
/usr/bin/python3 scripts/overlap_report.py --tag "rate=$rate" --tag "batch=$batch" \
  --overlap "$out"/overlap.* --no-overlap "$out"/no-overlap.*
# CPU time of the whole job (both ranks, start-up included) per iteration and rank: what
# the waiting costs shows here even when the iteration times hide it.
for mode in overlap no-overlap; do
  cat "$out/time/$mode".* | /usr/bin/python3 -c '
import json, statistics, sys
mode, iters = sys.argv[1], int(sys.argv[2])
cpu = [sum(map(float, l.split())) for l in sys.stdin if l.strip()]
print(json.dumps({"bench": "overlap_cpu", "mode": mode, "cpu_ms_per_iter_rank":
                  round(statistics.median(cpu) * 1e3 / iters / 2, 1)}))' "$mode" "$iters"
done
