#!/usr/bin/env bash
# Overlap benchmark: 2 ranks over a rate-limited loopback (MPI over TCP only),
# ResNet-20 on synthetic data. Three modes: forward-overlap (--forward-overlap: each bucket
# updated as it arrives, the next forward overlapping the buckets still in flight),
# overlap (the default: buckets overlap backward only, the step waits for all)
# and no-overlap (--no-overlap: everything exchanged after backward). The modes run
# alternately REPEATS times (a shared machine's load then hits all alike). Prints JSON
# lines (scripts/overlap_report.py): per mode the median iteration time, forward,
# backward and exposed communication over all runs' iterations after 10 warm-up ones,
# and the job's CPU seconds per iteration and rank; then per overlapped mode the hidden
# fraction (1 - exposed with overlap / exposed without), the saved fraction (iteration
# time saved / exposed communication without overlap), the speedup and the two bounds.
#   bench/overlap_bench.sh BUILD_DIR [RATE=50mbit] [ITERS=40] [REPEATS=1] [BATCH=64]
#                          [MODES="forward-overlap overlap no-overlap"] [FORWARD_FLAGS]
# FORWARD_FLAGS are added to the forward-overlap runs (e.g. "--first-layers-first 0").
# LINK (environment) picks the emulated network:
#   loopback (default): both ranks in one namespace whose loopback carries RATE in total,
#     so the two directions of every exchange share it (a hub, or half-duplex link);
#   hosts: each rank on its own emulated host (scripts/emulated_hosts.sh) whose link to the
#     switch carries RATE each way, as a full-duplex Ethernet port does. An allreduce moves
#     as many bytes each way as the loopback carries in total, so its exchange takes about
#     half as long at the same RATE.
# BATCH is per rank. Overlapping backward alone can hide at most the communication that
# fits into backward: when backward is shorter than the exchange, the saved fraction is
# bounded by about backward / exchange; overlapping the next forward as well raises that
# to about (backward + forward) / exchange (docs/RESULTS.md, "Overlap benchmark").
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
rate=${2:-50mbit}
iters=${3:-40}
repeats=${4:-1}
batch=${5:-64}
modes=(${6:-forward-overlap overlap no-overlap})
read -r -a forward_flags <<<"${7:-}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir "$out/time"
link=${LINK:-loopback}
case $link in
  loopback)
    launch=(scripts/netns_run.sh "$rate" -- mpirun --allow-run-as-root --oversubscribe -np 2
            --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo) ;;
  hosts)
    launch=(scripts/emulated_hosts.sh --rate "$rate" 2 -- -np 2 --map-by ppr:1:node
            --mca btl tcp,self) ;;
  *) echo "overlap_bench.sh: LINK must be loopback or hosts, got '$link'" >&2; exit 2 ;;
esac
args=(train --arch resnet20 --dataset synthetic --synthetic-size 100000 -b "$batch" --threads 1
      --workers 1 --max-iters "$iters" --eval-batches 1 -q --first-bucket-mb 0.05
      --bucket-cap-mb 0.2)
for ((i = 0; i < repeats; i++)); do
  for mode in "${modes[@]}"; do
    case $mode in
      forward-overlap) extra=(--forward-overlap "${forward_flags[@]}") ;;
      overlap) extra=() ;;
      no-overlap) extra=(--no-overlap) ;;
      *) echo "overlap_bench.sh: unknown mode '$mode'" >&2; exit 2 ;;
    esac
    /usr/bin/time -f "%U %S" -o "$out/time/$mode.$i" \
      "${launch[@]}" "$build/apps/sparsetrain" "${args[@]}" "${extra[@]}" \
      --out "$out/$mode.$i" >/dev/null 2>&1
  done
done
report=(--no-overlap "$out"/no-overlap.*)
for mode in "${modes[@]}"; do
  if [[ $mode != no-overlap ]]; then report+=("--$mode" "$out/$mode".*); fi
done
/usr/bin/python3 scripts/overlap_report.py --tag "rate=$rate" --tag "link=$link" --tag "batch=$batch" "${report[@]}"
# CPU time of the whole job (both ranks, start-up included) per iteration and rank: what
# the waiting costs shows here even when the iteration times hide it.
for mode in "${modes[@]}"; do
  cat "$out/time/$mode".* | /usr/bin/python3 -c '
import json, statistics, sys
mode, iters = sys.argv[1], int(sys.argv[2])
cpu = [sum(map(float, l.split())) for l in sys.stdin if l.strip()]
print(json.dumps({"bench": "overlap_cpu", "mode": mode, "cpu_ms_per_iter_rank":
                  round(statistics.median(cpu) * 1e3 / iters / 2, 1)}))' "$mode" "$iters"
done
