#!/usr/bin/env bash
# `--device cuda` with a sparsifier: a method whose bulk passes are not all behind the device
# interface (`sparsetrain sparsifiers --json` lists only "cpu" as its device) stops at start
# with one line saying so; a device-ready method gets past that check (here, without a GPU,
# it stops at the device itself; with one, it trains a step).
#   tests/apps/device_ready_test.sh path/to/sparsetrain
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
common=(train --arch small_cnn --dataset synthetic --synthetic-size 64 --test-subset 16 -b 16
        --epochs 1 --max-iters 1 --threads 1 --workers 0 --device cuda)

"$bin" sparsifiers --json >"$tmp/list.json" || fail "sparsifiers --json failed"
mapfile -t rows < <(/usr/bin/python3 -c '
import json, sys
for m in json.load(open(sys.argv[1]))["sparsifiers"]:
    print(m["name"], "cuda" in m["device"])' "$tmp/list.json")
[[ ${#rows[@]} -gt 0 ]] || fail "no sparsifiers listed"
refusal="runs on CPU buckets only, not on --device cuda"
for row in "${rows[@]}"; do
  read -r name ready <<<"$row"
  "$bin" "${common[@]}" --sparsifier "$name" --out "$tmp/$name" >"$tmp/$name.log" 2>&1
  rc=$?
  if [[ $ready == False ]]; then
    [[ $rc -eq 1 ]] || fail "$name (cpu only): exit code $rc, expected 1"
    [[ $(grep -c . "$tmp/$name.log") -eq 1 ]] || fail "$name: not one line: $(cat "$tmp/$name.log")"
    grep -q -- "--sparsifier $name $refusal" "$tmp/$name.log" ||
      fail "$name: refusal missing: $(cat "$tmp/$name.log")"
  elif grep -q -- "$refusal" "$tmp/$name.log"; then
    fail "$name is listed for cuda but refused: $(cat "$tmp/$name.log")"
  fi
done
# The emulated accelerator runs the device exchange's tests, not training: one line.
"$bin" "${common[@]/cuda/emu}" --out "$tmp/emu" >"$tmp/emu.log" 2>&1 && fail "--device emu trained"
[[ $(grep -c . "$tmp/emu.log") -eq 1 ]] || fail "--device emu: not one line: $(cat "$tmp/emu.log")"
grep -q -- "--device emu: the emulated accelerator runs the sparsified exchange" "$tmp/emu.log" ||
  fail "--device emu: $(cat "$tmp/emu.log")"
echo "device_ready_test: ok (${#rows[@]} methods)"
