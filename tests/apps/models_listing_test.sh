#!/usr/bin/env bash
# `sparsetrain models`: the counts of the listing (JSON lines and the text table) follow
# --classes, a bad --classes is one line naming it with exit code 2, and a listing that
# cannot be written is a failure; train --summary prints a model's table before training.
#   tests/apps/models_listing_test.sh path/to/sparsetrain
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" models --json --classes 10 >"$tmp/ten.jsonl" 2>"$tmp/ten.err" ||
  fail "models --json --classes 10: $(cat "$tmp/ten.err")"
grep -q '^{"name":"resnet18_cifar","params":11173962,' "$tmp/ten.jsonl" ||
  fail "no resnet18_cifar line with 11173962 params: $(cat "$tmp/ten.jsonl")"
# The counts of the MiCRO/ExDyna/SIDCo run scripts (bench/torch_cifar_models.py count).
for row in googlenet:6166250 senet18:11260354 se_resnet18:11263042; do
  grep -q "^{\"name\":\"${row%%:*}\",\"params\":${row#*:}," "$tmp/ten.jsonl" ||
    fail "no ${row%%:*} line with ${row#*:} params: $(cat "$tmp/ten.jsonl")"
done
# The language model once per preset, at the paper's vocabulary (its size follows it).
grep -q '^{"name":"lstm","params":28949319,"image_size":0,"preset":"micro_wikitext2","vocab":28869,' \
  "$tmp/ten.jsonl" || fail "no lstm micro_wikitext2 line with 28949319 params: $(cat "$tmp/ten.jsonl")"
grep -q '^{"name":"lstm","params":66034000,"image_size":0,"preset":"sidco_ptb","vocab":10000,' \
  "$tmp/ten.jsonl" || fail "no lstm sidco_ptb line with 66034000 params: $(cat "$tmp/ten.jsonl")"
# One JSON object per line, every line a row.
[[ $(grep -vc '^{"name":".*}$' "$tmp/ten.jsonl") -eq 0 ]] ||
  fail "a line that is not one JSON object: $(cat "$tmp/ten.jsonl")"

"$bin" models --json --classes 100 >"$tmp/hundred.jsonl" 2>"$tmp/hundred.err" ||
  fail "models --json --classes 100: $(cat "$tmp/hundred.err")"
grep -q '^{"name":"resnet18_cifar","params":11220132,"image_size":32,"classes":100,"channels":3,' \
  "$tmp/hundred.jsonl" || fail "no resnet18_cifar line with 11220132 params: $(cat "$tmp/hundred.jsonl")"
for row in googlenet:6258500 senet18:11306524 se_resnet18:11309212; do
  grep -q "^{\"name\":\"${row%%:*}\",\"params\":${row#*:},\"image_size\":32,\"classes\":100," \
    "$tmp/hundred.jsonl" || fail "no ${row%%:*} line with ${row#*:} params: $(cat "$tmp/hundred.jsonl")"
done

"$bin" models >"$tmp/text.txt" 2>"$tmp/text.err" || fail "models: $(cat "$tmp/text.err")"
grep -Eq '^resnet18_cifar +11,173,962 +32x32 ' "$tmp/text.txt" ||
  fail "text listing lacks 11,173,962 for resnet18_cifar: $(cat "$tmp/text.txt")"
grep -Eq '^lstm +28,949,319 +28,869 words +--preset micro_wikitext2: MiCRO' "$tmp/text.txt" ||
  fail "text listing lacks 28,949,319 for lstm --preset micro_wikitext2: $(cat "$tmp/text.txt")"

"$bin" models --classes 0 >"$tmp/zero.out" 2>"$tmp/zero.err"
rc=$?
[[ $rc -eq 2 ]] || fail "--classes 0: exit code $rc, expected 2"
[[ $(wc -l <"$tmp/zero.err") -eq 1 ]] || fail "--classes 0: not one line: $(cat "$tmp/zero.err")"
grep -q -- '--classes' "$tmp/zero.err" || fail "--classes 0: flag not named: $(cat "$tmp/zero.err")"
[[ ! -s "$tmp/zero.out" ]] || fail "--classes 0 printed a listing: $(cat "$tmp/zero.out")"

if "$bin" models >/dev/full 2>"$tmp/full.err"; then
  fail "models >/dev/full exited 0"
fi
grep -q 'cannot write to standard output' "$tmp/full.err" ||
  fail "models >/dev/full: $(cat "$tmp/full.err")"
# train --summary prints the same table for the model the run trains, then trains.
"$bin" train --arch resnet20 --dataset synthetic --synthetic-size 32 -b 16 --test-subset 16 \
  --eval-batches 1 --workers 0 --threads 1 -q --max-iters 1 --summary --out "$tmp/run" \
  >"$tmp/train.out" 2>"$tmp/train.err" || fail "train --summary: $(cat "$tmp/train.err")"
grep -Eq '^total +269,722 +40,552,426$' "$tmp/train.err" ||
  fail "train --summary: no total with multiply-adds: $(cat "$tmp/train.err")"
grep -Eq '^conv1 +Conv2d\(3->16, k3, s1, p1\) +\[1, 16, 32, 32\] +432 +442,368$' "$tmp/train.err" ||
  fail "train --summary: no conv1 row with its output and multiply-adds: $(cat "$tmp/train.err")"
"$bin" models --summary resnet20 >"$tmp/summary.txt" 2>&1 || fail "models --summary resnet20"
diff <(sed -n '2,$p' "$tmp/summary.txt") <(grep -A100000 -m1 '^layer  ' "$tmp/train.err" |
  grep -B100000 -m1 'multiply-adds for an input') >/dev/null ||
  fail "train --summary and models --summary differ: $(cat "$tmp/train.err")"
[[ -f "$tmp/run/checkpoint.safetensors" ]] || fail "train --summary did not train"
echo "models_listing_test: ok"
