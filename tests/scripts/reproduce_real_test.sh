#!/usr/bin/env bash
# scripts/reproduce.sh with the real sparsetrain binary through a grid line with sp= keys
# (MiCRO and ExDyna, on 1 and 2 ranks, a few steps on tiny synthetic data): every run
# finishes, gets the pairs as `--sp key=value`, and records them in its config.json.
#   tests/scripts/reproduce_real_test.sh SPARSETRAIN   (exit 1 on any failure)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(readlink -f "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {  # description, then a command that must succeed
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

mkdir -p "$tmp/build/apps"
ln -s "$bin" "$tmp/build/apps/sparsetrain"
cat >"$tmp/grid.conf" <<'CONF'
train name=g tag=fast model=small_cnn dataset=synthetic sparsifiers=micro,exdyna densities=0.05 ranks=1,2 bandwidths=none batch=8 max_iters=3 warmup=1 threads=1 sp="up=1.1 down=0.9" args="--synthetic-size 64 --test-subset 16 --eval-batches 1 -q"
CONF
"$root/scripts/reproduce.sh" --build "$tmp/build" --out "$tmp/out" --config "$tmp/grid.conf" \
  --no-report >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
check "the grid succeeds" test $rc -eq 0
check "all 4 runs done" test "$(grep -c 'done in' "$tmp/log")" -eq 4
for run in small_cnn_np1_none_micro_d0.05_fast small_cnn_np2_none_micro_d0.05_fast \
  small_cnn_np1_none_exdyna_d0.05_fast small_cnn_np2_none_exdyna_d0.05_fast; do
  d="$tmp/out/g/$run"
  check "$run finished" test -f "$d/run.json"
  check "$run got --sp key=value" grep -q -- '--sp up=1.1 --sp down=0.9' "$d/log.txt"
  check "$run recorded the pairs" grep -q '"sp": "down=0.9 up=1.1"' "$d/config.json"
done

# A dry run passes every command through the binary's own checks first: a key the method
# does not take, a value out of range and a flag the runner already sets each stop it with
# exit 2 and the binary's line, before anything runs.
bad() {  # sp pairs, args, expected text
  printf 'train name=b model=small_cnn dataset=synthetic sparsifiers=micro ranks=1 bandwidths=none max_iters=3 sp="%s" args="%s"\n' \
    "$1" "$2" >"$tmp/bad.conf"
  "$root/scripts/reproduce.sh" --build "$tmp/build" --out "$tmp/bad" --config "$tmp/bad.conf" \
    --dry-run >"$tmp/bad.log" 2>&1
  local rc=$?
  check "dry run refuses sp=\"$1\" args=\"$2\"" bash -c "[[ $rc -eq 2 ]] &&
    grep -qF -- \"bad.conf:1: b/small_cnn_np1_none_micro_d0.01: $3\" '$tmp/bad.log' &&
    ! grep -q 'would run' '$tmp/bad.log'"
}
bad "upp=1.1" "" "--sp upp: not a parameter of --sparsifier micro"
bad "up=-3" "" "--sparsifier micro: --sp up=-3 is not allowed"
bad "" "--precision fp8" "unknown --precision 'fp8'"
bad "" "--workers 0" "--workers: At Most 1 required but received 2"
echo "$fails failure(s)"
[[ $fails -eq 0 ]]
