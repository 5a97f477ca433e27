#!/usr/bin/env bash
# The train flags as the table in train/flags.cpp declares them, seen from the command line:
#  - --help lists each flag with its help, and the language model's flags among them;
#  - --check-flags applies the table's ranges and the --arch lstm defaults;
#  - with mpirun: ranks started with a different LSTM hidden size are refused in one line
#    naming the flag and the ranks, before any training.
#   tests/apps/flag_table_test.sh path/to/sparsetrain path/to/mpirun
set -uo pipefail
bin=$1
mpirun=${2:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" train --help >"$tmp/help.txt" || fail "train --help exited $?"
for flag in --arch --batch-size --lr --betas --no-augment --sp --layers --hidden --emsize \
  --bptt --dropout --tied; do
  grep -qE -- "(^|[ ,])$flag([ ,=]|$)" "$tmp/help.txt" || fail "--help lacks $flag"
done
grep -qF -- "LSTM hidden units (--arch lstm)" "$tmp/help.txt" || fail "--help lacks --hidden's help"
"$bin" train --arch lstm --check-flags >"$tmp/ok.log" 2>&1 || fail "--check-flags: $(cat "$tmp/ok.log")"
grep -qF "flags ok" "$tmp/ok.log" || fail "--check-flags printed $(cat "$tmp/ok.log")"
"$bin" train --arch lstm --momentum 1 --check-flags >"$tmp/bad.log" 2>&1 && fail "--momentum 1 passed"
grep -qF -- "--momentum must be below 1, got 1" "$tmp/bad.log" || fail "momentum: $(cat "$tmp/bad.log")"

# A tiny corpus, so rank 0 would have something to train on.
mkdir -p "$tmp/corpus"
for split in train valid test; do
  for i in $(seq 40); do echo "the cat sat on the mat and the dog ran $i"; done >"$tmp/corpus/$split.txt"
done
lm=(train --arch lstm --dataset text --data-dir "$tmp/corpus" --emsize 8 --bptt 5 -b 2 --epochs 1
    --threads 1 --workers 0 -q --out "$tmp/run")
"$mpirun" --allow-run-as-root --oversubscribe -np 1 "$bin" "${lm[@]}" --hidden 8 : \
  -np 1 "$bin" "${lm[@]}" --hidden 16 >"$tmp/mix.log" 2>&1
[[ $? -ne 0 ]] || fail "ranks with different --hidden did not fail"
grep -qF "error on rank 1 of 2: rank 1 was started with --hidden '16', which differs from rank 0's" \
  "$tmp/mix.log" || fail "mixed --hidden message: $(cat "$tmp/mix.log")"
[[ $(grep -c "sparsetrain: error" "$tmp/mix.log") -eq 1 ]] ||
  fail "more than one error line: $(cat "$tmp/mix.log")"
[[ ! -e "$tmp/run/checkpoint.safetensors" ]] || fail "a checkpoint was written"
echo "flag_table_test: ok"
