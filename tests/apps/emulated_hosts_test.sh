#!/usr/bin/env bash
# The multi-node launch path on one machine: scripts/emulated_hosts.sh makes 2 hosts
# (network namespaces with their own addresses and host names) and launches through
# mpirun's remote agent, 2 ranks per host; a sparsified ResNet-20 trains 3 iterations with
# --print-placement, and every rank must report the host and node-local rank the hostfile
# and --map-by ppr:2:node give: ranks 0, 1 on st-host1 as local 0, 1; ranks 2, 3 on
# st-host2 as local 0, 1. Skips (exit 77) where namespaces cannot be made.
#   tests/apps/emulated_hosts_test.sh path/to/sparsetrain path/to/repo
set -uo pipefail
bin=$(realpath "$1")
repo=$2
if [[ $(id -u) -ne 0 ]] || ! ip netns list >/dev/null 2>&1 || ! command -v unshare >/dev/null; then
  echo "SKIP: needs root, ip netns and unshare to emulate hosts"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 240 "$repo/scripts/emulated_hosts.sh" 2 -- -np 4 --map-by ppr:2:node \
  --mca btl tcp,self "$bin" train --arch resnet20 --dataset synthetic --synthetic-size 256 \
  -b 8 --threads 1 --workers 0 -q --sparsifier micro --density 0.01 --max-iters 3 \
  --eval-batches 1 --print-placement --out "$tmp/run" >"$tmp/log" 2>&1
rc=$?
[[ $rc -eq 0 ]] || { cat "$tmp/log"; echo "FAIL: the emulated 2-host run exited with $rc"; exit 1; }
status=0
for r in 0 1 2 3; do
  want="placement: rank $r of 4 on host st-host$((r / 2 + 1)), node-local rank $((r % 2)) of 2, device cpu"
  grep -qxF "$want" "$tmp/log" || { echo "FAIL: missing line: $want"; status=1; }
done
lines=$(grep -c '^placement:' "$tmp/log")
[[ $lines -eq 4 ]] || { echo "FAIL: $lines placement lines, expected 4"; status=1; }
rows=$(grep -c . "$tmp/run/iterations.csv" 2>/dev/null || echo 0)
[[ $rows -ge 4 ]] || { echo "FAIL: iterations.csv has $rows lines, expected a header and 3 steps"; status=1; }
[[ $status -eq 0 ]] && { grep '^placement:' "$tmp/log" | sort; echo "ok: 2 emulated hosts x 2 ranks, placement as the hostfile says"; }
[[ $status -eq 0 ]] || cat "$tmp/log"
exit $status
