#!/usr/bin/env bash
# The signals a cluster or a terminal sends: SIGUSR1 (SLURM's --signal warning before the
# time limit) and SIGHUP (a lost ssh connection) finish the step, write a checkpoint and
# exit 128 + the signal with a line naming it; resuming reproduces the uninterrupted run
# bit for bit. A second signal exits at once with one line, the previous checkpoint whole.
#   tests/apps/stop_signals_test.sh path/to/sparsetrain
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
long=(train --arch resnet20 -b 8 --threads 1 --workers 0 -q --dataset synthetic --synthetic-size 480
      --test-subset 16 --epochs 2 --checkpoint-minutes 0)
losses() { cut -d, -f1-5 "$1"; }  # epoch, iter, step, loss, acc: no timings

"$bin" "${long[@]}" --out "$tmp/full" >"$tmp/full.log" 2>&1 || fail "full run: $(tail -n 3 "$tmp/full.log")"

# start_and_wait NAME: a run into $tmp/NAME in the background, returned once it logged
# a few steps (its pid in $pid).
start_and_wait() {
  "$bin" "${long[@]}" --out "$tmp/$1" >"$tmp/$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    [[ -f "$tmp/$1/iterations.csv" && $(wc -l <"$tmp/$1/iterations.csv") -ge 4 ]] && break
    sleep 0.05
  done
}

for sig in USR1 HUP; do
  name=$(echo "$sig" | tr 'A-Z' 'a-z')
  start_and_wait "$name"
  kill -s "$sig" $pid
  wait $pid
  rc=$?
  expected=$((128 + $(kill -l "$sig")))
  [[ $rc -eq $expected ]] || fail "SIG$sig: exit code $rc, expected $expected: $(tail -n 3 "$tmp/$name.log")"
  grep -q "interrupted by SIG$sig at step" "$tmp/$name.log" || fail "SIG$sig line missing: $(cat "$tmp/$name.log")"
  [[ -f "$tmp/$name/checkpoint.safetensors" ]] || fail "SIG$sig left no checkpoint"
  "$bin" "${long[@]}" --out "$tmp/$name" --resume "$tmp/$name/checkpoint.safetensors" >"$tmp/res.log" 2>&1 ||
    fail "resume after SIG$sig: $(tail -n 3 "$tmp/res.log")"
  diff <(losses "$tmp/full/iterations.csv") <(losses "$tmp/$name/iterations.csv") >/dev/null ||
    fail "SIG$sig: interrupted + resumed rows differ from the uninterrupted run"
  diff <(cut -d, -f1-6 "$tmp/full/epochs.csv") <(cut -d, -f1-6 "$tmp/$name/epochs.csv") >/dev/null ||
    fail "SIG$sig: epochs.csv differs: $(cat "$tmp/$name/epochs.csv")"
done

# A second signal while the first is handled exits at once, saying so. The run is
# stopped while both are sent, so both are pending when it continues (SIGINT and
# SIGTERM: two of one kind would merge into one); it exits with 128 + the second.
start_and_wait twice
kill -STOP $pid
kill -INT $pid
kill -TERM $pid
kill -CONT $pid
wait $pid
rc=$?
[[ $rc -eq 130 || $rc -eq 143 ]] || fail "second signal: exit code $rc, expected 130 or 143: $(cat "$tmp/twice.log")"
grep -q "second stop signal: exiting now" "$tmp/twice.log" || fail "second signal printed no line: $(cat "$tmp/twice.log")"
[[ $(grep -c . "$tmp/twice.log") -eq 1 ]] || fail "second signal: more than one line: $(cat "$tmp/twice.log")"
echo "stop_signals_test: ok"
