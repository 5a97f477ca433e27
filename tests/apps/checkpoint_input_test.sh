#!/usr/bin/env bash
# Checkpoints and run folders a careless or hostile user hands to the command line, each
# ending in one clear line and exit 1 (or the documented behaviour):
#  - a mid-epoch checkpoint resumed with another --seed or --synthetic-size (the epoch's
#    batch order differs) is refused, as another number of ranks is; an epoch end is not;
#  - a run folder given to --resume or eval says which file was meant;
#  - metadata naming another sparsifier than the state it holds is refused;
#  - a bucket plan that does not fit the checkpoint names the sizes the checkpoint records
#    (and no flag values a checkpoint does not record);
#  - the language model's summary leaves out a split it never evaluated.
#   tests/apps/checkpoint_input_test.sh path/to/sparsetrain
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run=(train --arch small_cnn -b 16 --test-subset 32 --eval-batches 1 --workers 0 --threads 1 -q
     --dataset synthetic)

# expect_error NAME MESSAGE ARGS...: exit 1 and one line holding MESSAGE.
expect_error() {
  local name=$1 msg=$2
  shift 2
  "$bin" "$@" >"$tmp/$name.log" 2>&1
  local rc=$?
  [[ $rc -eq 1 ]] || fail "$name: exit code $rc, expected 1: $(tail -n 3 "$tmp/$name.log")"
  grep -qF -- "$msg" "$tmp/$name.log" || fail "$name: message lacks '$msg': $(cat "$tmp/$name.log")"
  [[ $(grep -c . "$tmp/$name.log") -eq 1 ]] || fail "$name: more than one line: $(cat "$tmp/$name.log")"
  echo "ok   $name: $(cat "$tmp/$name.log")"
}
# set_meta FILE KEY VALUE (VALUE "-" deletes the key): edits a checkpoint's metadata; the
# data section, and with it the checksum, stays as it was.
set_meta() {
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
path, key, value = sys.argv[1:4]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
if value == "-":
    head["__metadata__"].pop(key, None)
else:
    head["__metadata__"][key] = value
text = json.dumps(head).encode()
open(path, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
}

# Mid-epoch (step 5 of 16), then resumes that change the epoch's order.
"$bin" "${run[@]}" --synthetic-size 256 --epochs 2 --max-iters 5 --out "$tmp/a" >"$tmp/a.log" 2>&1 ||
  fail "first run: $(tail -n 3 "$tmp/a.log")"
ck=$tmp/a/checkpoint.safetensors
expect_error seed "a mid-epoch checkpoint with --seed 0 resumes only with the same --seed, not 7" \
  "${run[@]}" --synthetic-size 256 --epochs 2 --seed 7 --resume "$ck" --out "$tmp/a"
expect_error synthetic_size \
  "a mid-epoch checkpoint with --synthetic-size 256 resumes only with the same --synthetic-size, not 512" \
  "${run[@]}" --synthetic-size 512 --epochs 2 --resume "$ck" --out "$tmp/a"
"$bin" "${run[@]}" --synthetic-size 256 --epochs 2 --max-iters 6 --resume "$ck" --out "$tmp/a" \
  >"$tmp/same.log" 2>&1 || fail "resume with the same flags: $(tail -n 3 "$tmp/same.log")"
echo "ok   the same flags resume"
# At an epoch end another seed is a new shuffle, not a different position: accepted.
"$bin" "${run[@]}" --synthetic-size 64 --epochs 1 --out "$tmp/e" >"$tmp/e.log" 2>&1 ||
  fail "epoch run: $(tail -n 3 "$tmp/e.log")"
"$bin" "${run[@]}" --synthetic-size 64 --epochs 2 --seed 7 --resume "$tmp/e/checkpoint.safetensors" \
  --out "$tmp/e" >"$tmp/e2.log" 2>&1 || fail "epoch-end resume with --seed 7: $(tail -n 3 "$tmp/e2.log")"
echo "ok   an epoch end resumes with another --seed"

# A run folder where its checkpoint is meant.
expect_error resume_dir "$tmp/a is a directory (did you mean $tmp/a/checkpoint.safetensors?)" \
  "${run[@]}" --synthetic-size 256 --epochs 2 --resume "$tmp/a" --out "$tmp/a"
expect_error eval_dir "$tmp/a is a directory (did you mean $tmp/a/checkpoint.safetensors?)" \
  eval "$tmp/a" --dataset synthetic --test-subset 16 --workers 0 --threads 1

# A MiCRO run whose metadata is edited to name Top-k.
sp=("${run[@]}" --synthetic-size 64 --epochs 2 --sparsifier micro)
"$bin" "${sp[@]}" --max-iters 2 --out "$tmp/m" >"$tmp/m.log" 2>&1 || fail "micro run: $(tail -n 3 "$tmp/m.log")"
cp "$tmp/m/checkpoint.safetensors" "$tmp/m.safetensors"
set_meta "$tmp/m/checkpoint.safetensors" sparsifier topk
expect_error sparsifier_state \
  "the metadata says --sparsifier topk but sparsify.state holds the state of micro" \
  "${sp[@]}" --max-iters 3 --resume "$tmp/m/checkpoint.safetensors" --out "$tmp/m"

# A bucket plan that does not fit: the recorded sizes, or that there are none.
cp "$tmp/m.safetensors" "$tmp/m/checkpoint.safetensors"
expect_error bucket_plan "the checkpoint was written with --bucket-cap-mb 25 --first-bucket-mb 1; resume with those" \
  "${sp[@]}" --max-iters 3 --first-bucket-mb 0.01 --resume "$tmp/m/checkpoint.safetensors" --out "$tmp/m"
set_meta "$tmp/m/checkpoint.safetensors" bucket_cap_mb -
expect_error bucket_plan_unrecorded "the checkpoint does not record its bucket sizes" \
  "${sp[@]}" --max-iters 3 --first-bucket-mb 0.01 --resume "$tmp/m/checkpoint.safetensors" --out "$tmp/m"

# The language model stopped before any evaluation: no test or validation numbers.
lm=(train --arch lstm --layers 1 --hidden 16 --emsize 16 --bptt 8 -b 4 --eval-batches 1
    --workers 0 --threads 1 -q --test-subset 200)
"$bin" "${lm[@]}" --max-iters 2 --out "$tmp/l" >"$tmp/l.out" 2>"$tmp/l.err" ||
  fail "lstm run: $(tail -n 3 "$tmp/l.err")"
grep -q '"steps":2' "$tmp/l.out" || fail "lstm summary: $(cat "$tmp/l.out")"
! grep -q 'test_ppl' "$tmp/l.out" || fail "lstm summary shows a test split never evaluated: $(cat "$tmp/l.out")"
echo "ok   lstm summary without unevaluated splits: $(cat "$tmp/l.out")"
echo "all passed"
