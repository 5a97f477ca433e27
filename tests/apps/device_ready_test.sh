#!/usr/bin/env bash
# Which devices a sparsifier trains on, as `sparsetrain sparsifiers --json` lists them, is
# what the CLI enforces: with `--device cuda`, a method not listed for cuda (one that needs
# per-sample squared gradients, which only the CPU layers compute) stops at start with one
# line; a listed method gets past that check (here, without a GPU, it stops at the device
# itself; with one, it trains a step). Every method listed for emu trains a step on it.
#   tests/apps/device_ready_test.sh path/to/sparsetrain
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
common=(train --arch small_cnn --dataset synthetic --synthetic-size 64 --test-subset 16 -b 16
        --epochs 1 --max-iters 1 --threads 1 --workers 0)

"$bin" sparsifiers --json >"$tmp/list.json" || fail "sparsifiers --json failed"
mapfile -t rows < <(/usr/bin/python3 -c '
import json, sys
for m in json.load(open(sys.argv[1]))["sparsifiers"]:
    print(m["name"], "cuda" in m["device"], "emu" in m["device"])' "$tmp/list.json")
[[ ${#rows[@]} -gt 0 ]] || fail "no sparsifiers listed"
refusal="which only the CPU layers compute: train it with --device cpu (or emu), not cuda"
refused=0
for row in "${rows[@]}"; do
  read -r name cuda emu <<<"$row"
  "$bin" "${common[@]}" --device cuda --sparsifier "$name" --out "$tmp/$name" >"$tmp/$name.log" 2>&1
  rc=$?
  if [[ $cuda == False ]]; then
    refused=$((refused + 1))
    [[ $rc -eq 1 ]] || fail "$name (not on cuda): exit code $rc, expected 1"
    [[ $(grep -c . "$tmp/$name.log") -eq 1 ]] || fail "$name: not one line: $(cat "$tmp/$name.log")"
    grep -q -- "--sparsifier $name needs .*$refusal" "$tmp/$name.log" ||
      fail "$name: refusal missing: $(cat "$tmp/$name.log")"
  elif grep -q -- "$refusal" "$tmp/$name.log"; then
    fail "$name is listed for cuda but refused: $(cat "$tmp/$name.log")"
  fi
  [[ $emu == True ]] || fail "$name is not listed for emu"
  "$bin" "${common[@]}" --device emu --sparsifier "$name" --out "$tmp/emu_$name" \
    >"$tmp/emu_$name.log" 2>&1 || fail "$name on --device emu: $(tail -3 "$tmp/emu_$name.log")"
done
[[ $refused -ge 1 ]] || fail "no method is refused on cuda (vgc needs per-sample squares)"
echo "device_ready_test: ok (${#rows[@]} methods, $refused refused on cuda, all trained on emu)"
