#!/usr/bin/env bash
# A rank that dies (kill -9) or throws takes the whole job down within 30 s, and the
# output names the failed rank; nothing hangs.
#   rank_failure_test.sh <sparsetrain binary> <mpiexec>
set -u
bin=$1
mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(train --arch small_cnn --dataset synthetic --synthetic-size 1000000 --epochs 1 -b 16
        --threads 1 --workers 1 -q)

# 1. kill -9 of rank 1 while training.
"$mpiexec" --allow-run-as-root --oversubscribe -np 3 "$bin" "${common[@]}" --out "$work/kill" \
  >"$work/kill.log" 2>&1 &
job=$!
for _ in $(seq 1 100); do
  [[ -f "$work/kill/config.json" ]] && break
  sleep 0.2
done
sleep 2
victim=$(pgrep -f -- "--out $work/kill" | while read -r p; do
  [[ "$(tr '\0' ' ' </proc/"$p"/environ 2>/dev/null)" == *OMPI_COMM_WORLD_RANK=1* ]] && echo "$p"
done | head -n 1)
if [[ -z "$victim" ]]; then
  echo "FAIL: could not find rank 1"; kill -9 $job; exit 1
fi
start=$(date +%s)
kill -9 "$victim"
for _ in $(seq 1 300); do
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
if kill -0 $job 2>/dev/null; then
  echo "FAIL: job still running 30 s after rank 1 was killed"; pkill -9 -f -- "--out $work/kill"; exit 1
fi
elapsed=$(($(date +%s) - start))
if ! grep -qiE "rank 1" "$work/kill.log"; then
  echo "FAIL: output does not name rank 1:"; cat "$work/kill.log"; exit 1
fi
echo "ok: job ended ${elapsed}s after rank 1 was killed; output names rank 1"

# 2. A rank that throws (bad input) aborts the job with a message naming its rank.
start=$(date +%s)
timeout 60 "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$bin" train --arch small_cnn \
  --dataset cifar10 --data-dir "$work/nonexistent" --out "$work/bad" -q >"$work/bad.log" 2>&1
rc=$?
if [[ $rc -eq 0 || $rc -eq 124 ]]; then
  echo "FAIL: bad input gave exit code $rc"; cat "$work/bad.log"; exit 1
fi
if ! grep -qE "error on rank [0-9] of 2: .*nonexistent" "$work/bad.log"; then
  echo "FAIL: no per-rank error line:"; cat "$work/bad.log"; exit 1
fi
echo "ok: bad input aborted the job in $(($(date +%s) - start))s with a per-rank error"
