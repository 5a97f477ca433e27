#!/usr/bin/env bash
# What keeps a user's runs whole, each ending in one clear line and a non-zero exit (or
# the documented behaviour):
#  - a diverged update is never saved: the stop names the last good checkpoint, which
#    loads and evaluates to finite numbers (one rank, and MiCRO on two);
#  - --resume of one run's checkpoint into a folder holding another run is refused
#    (--overwrite replaces it); two runs started at once into one --out: one is refused
#    while the other runs, and the other's files stay whole;
#  - a test split that does not divide among 2 or 8 ranks: the logged test loss is eval's;
#  - fp16 overflowing into the evaluation stops the run instead of reporting nan;
#  - --accum-steps trains the epoch's leftover micro-batches as a shorter last step;
#  - a final batch of one example with BatchNorm is left out with a note;
#  - an --accum-steps run resumed mid-epoch on two ranks reproduces epochs.csv bit for
#    bit; --max-iters at or below the checkpoint's step, --epochs already completed and
#    a step counter near 2^63 are refused.
#   tests/apps/run_integrity_test.sh path/to/sparsetrain path/to/mpirun
set -uo pipefail
bin=$1
mpirun=${2:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mpi=("$mpirun" --allow-run-as-root --oversubscribe)
q=(--dataset synthetic --synthetic-size 256 -b 16 --test-subset 32 --eval-batches 1 --workers 0
   --threads 1 -q)
run=(train --arch small_cnn "${q[@]}")
ev=(eval --dataset synthetic --synthetic-size 256 -b 16 --test-subset 32 --workers 0 --threads 1)

# expect_error NAME EXIT_CODE MESSAGE CMD...: CMD exits with EXIT_CODE and its only line
# holds MESSAGE.
expect_error() {
  local name=$1 code=$2 msg=$3
  shift 3
  "$@" >"$tmp/$name.log" 2>&1
  local rc=$?
  [[ $rc -eq $code ]] || fail "$name: exit code $rc, expected $code: $(tail -n 3 "$tmp/$name.log")"
  grep -qF -- "$msg" "$tmp/$name.log" || fail "$name: message lacks '$msg': $(cat "$tmp/$name.log")"
  [[ $(grep -c . "$tmp/$name.log") -eq 1 ]] || fail "$name: more than one line: $(cat "$tmp/$name.log")"
}
# finite_eval CHECKPOINT [RANKS]: eval prints a finite test loss.
finite_eval() {
  "$bin" "${ev[@]}" "$1" >"$tmp/eval.log" 2>&1 || fail "eval $1: $(cat "$tmp/eval.log")"
  grep -qE '"test_loss":-?[0-9]' "$tmp/eval.log" || fail "eval of $1 is not finite: $(cat "$tmp/eval.log")"
}
meta() {  # meta FILE KEY: a checkpoint's metadata value
  python3 -c "import json,struct,sys; b=open(sys.argv[1],'rb').read(); n=struct.unpack('<Q',b[:8])[0]; print(json.loads(b[8:8+n])['__metadata__'][sys.argv[2]])" "$1" "$2"
}

# A diverged update (finite loss, NaN weights after it) is not saved over step 1's.
expect_error nan 1 "training diverged: 'conv1.weight' holds NaN or inf after step 2; stopping without saving it. The last good checkpoint is $tmp/nan/checkpoint.safetensors (step 1)" \
  "$bin" "${run[@]}" --epochs 3 --lr 1e30 --checkpoint-every 1 --out "$tmp/nan"
[[ $(meta "$tmp/nan/checkpoint.safetensors" step) == 1 ]] || fail "the kept checkpoint is not step 1's"
finite_eval "$tmp/nan/checkpoint.safetensors"
"${mpi[@]}" -np 2 "$bin" "${run[@]}" --epochs 3 --lr 1e30 --sparsifier micro --checkpoint-every 1 \
  --out "$tmp/nan2" >"$tmp/nan2.log" 2>&1 && fail "a diverged 2-rank run exited 0"
grep -q "The last good checkpoint is $tmp/nan2/checkpoint.safetensors" "$tmp/nan2.log" ||
  fail "2-rank NaN stop: $(cat "$tmp/nan2.log")"
finite_eval "$tmp/nan2/checkpoint.safetensors"

# --resume A --out B, B holding another run: refused, B untouched; --overwrite replaces B.
"$bin" "${run[@]}" --epochs 2 --max-iters 20 --out "$tmp/A" >/dev/null 2>&1 || fail "run A"
"$bin" "${run[@]}" --epochs 1 --max-iters 5 --seed 3 --out "$tmp/B" >/dev/null 2>&1 || fail "run B"
before=$(md5sum "$tmp/B/iterations.csv" "$tmp/B/config.json" "$tmp/B/checkpoint.safetensors")
expect_error merge 1 "--out $tmp/B already holds another run" \
  "$bin" "${run[@]}" --epochs 2 --resume "$tmp/A/checkpoint.safetensors" --out "$tmp/B"
[[ $(md5sum "$tmp/B/iterations.csv" "$tmp/B/config.json" "$tmp/B/checkpoint.safetensors") == "$before" ]] ||
  fail "a refused resume changed B's files"
"$bin" "${run[@]}" --epochs 2 --resume "$tmp/A/checkpoint.safetensors" --out "$tmp/B" --overwrite \
  >/dev/null 2>&1 || fail "--overwrite of B"
[[ $(sed -n 2p "$tmp/B/iterations.csv" | cut -d, -f3) == 21 ]] || fail "B after --overwrite: $(head -3 "$tmp/B/iterations.csv")"

# Two runs into one --out: the second finds the folder claimed while the first runs.
"$bin" train --arch resnet20 "${q[@]}" --epochs 2 --seed 1 --out "$tmp/C" >"$tmp/c1.log" 2>&1 &
first=$!
for _ in $(seq 1 600); do
  [[ -s "$tmp/C/.sparsetrain.lock" && -f "$tmp/C/config.json" ]] && break
  sleep 0.05
done
expect_error claim 1 "--out $tmp/C is in use by another run (process $first holds" \
  "$bin" "${run[@]}" --epochs 2 --seed 2 --out "$tmp/C"
wait $first || fail "the first run into C: $(tail -n 3 "$tmp/c1.log")"
[[ $(wc -l <"$tmp/C/iterations.csv") -eq 33 ]] || fail "C has $(wc -l <"$tmp/C/iterations.csv") lines, not 33"
grep -q '"seed": "1"' "$tmp/C/config.json" || fail "C's config.json is not the first run's"

# A test split that does not divide among the ranks: every example counted once, so the
# run's test loss is the one eval gives on its checkpoint (51 examples on 2 ranks, 3 on 8).
same_loss() {  # same_loss NAME RANKS TRAIN_FLAGS...
  local name=$1 np=$2
  shift 2
  "${mpi[@]}" -np "$np" "$bin" train --arch small_cnn "$@" -b 4 --workers 0 --threads 1 -q --epochs 1 \
    --out "$tmp/$name" >"$tmp/$name.log" 2>&1 || fail "$name: $(tail -n 3 "$tmp/$name.log")"
  "$bin" eval "$@" -b 4 --workers 0 --threads 1 "$tmp/$name/checkpoint.safetensors" >"$tmp/$name.eval" 2>&1 ||
    fail "$name eval: $(cat "$tmp/$name.eval")"
  local logged evaluated
  logged=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="test_loss") c=i} NR==2{print $c}' "$tmp/$name/epochs.csv")
  evaluated=$(sed -E 's/.*"test_loss":([0-9.eE+-]+).*/\1/' "$tmp/$name.eval")
  python3 -c "import sys; a,b=float('$logged'),float('$evaluated'); sys.exit(abs(a-b) > 1e-5*abs(b))" ||
    fail "$name: $np-rank test loss $logged != eval of its checkpoint $evaluated"
  echo "$name: $np ranks, test loss $logged, eval $evaluated"
}
same_loss split2 2 --dataset synthetic --synthetic-size 256
same_loss split8 8 --dataset synthetic --synthetic-size 64 --test-subset 3

# fp16 whose evaluation overflows: a clear stop, not "test loss nan" and exit 0.
expect_error fp16 1 "gave a loss of" "$bin" "${run[@]}" --epochs 2 --precision fp16 --lr 2 \
  --max-iters 30 --out "$tmp/fp16"

# --accum-steps: the leftover micro-batches are a shorter last step.
"$bin" "${run[@]}" --epochs 1 --accum-steps 17 --out "$tmp/acc17" >/dev/null 2>&1 || fail "accum 17"
[[ $(wc -l <"$tmp/acc17/iterations.csv") -eq 2 ]] || fail "accum 17 over 16 micro-batches: not one step"
"${mpi[@]}" -np 2 "$bin" "${run[@]}" --epochs 1 --accum-steps 3 --out "$tmp/acc3" >/dev/null 2>&1 || fail "accum 3"
[[ $(sed -n 2p "$tmp/acc3/epochs.csv" | cut -d, -f2) == 3 ]] ||
  fail "accum 3 over 8 micro-batches per rank: $(cat "$tmp/acc3/epochs.csv")"

# 9 examples, -b 2: the last batch holds one example, which BatchNorm cannot train on.
"$bin" train --arch resnet18 --image-size 32 --dataset synthetic --synthetic-size 9 -b 2 --workers 0 \
  --threads 1 --epochs 1 --out "$tmp/one" >"$tmp/one.log" 2>&1 || fail "one-example batch: $(tail -n 3 "$tmp/one.log")"
grep -q "note: each epoch's last batch would hold one example per rank" "$tmp/one.log" ||
  fail "no note on the left-out batch: $(cat "$tmp/one.log")"
[[ $(wc -l <"$tmp/one/iterations.csv") -eq 5 && -f "$tmp/one/checkpoint.safetensors" ]] ||
  fail "one-example batch: $(cat "$tmp/one/iterations.csv")"

# An --accum-steps run resumed mid-epoch on two ranks: epochs.csv as uninterrupted.
acc=(train --arch small_cnn --dataset synthetic --synthetic-size 256 -b 4 --test-subset 32
     --eval-batches 1 --workers 0 --threads 1 -q --epochs 1 --accum-steps 3)
"${mpi[@]}" -np 2 "$bin" "${acc[@]}" --out "$tmp/whole" >/dev/null 2>&1 || fail "accum whole"
"${mpi[@]}" -np 2 "$bin" "${acc[@]}" --max-iters 4 --out "$tmp/part" >/dev/null 2>&1 || fail "accum part"
"${mpi[@]}" -np 2 "$bin" "${acc[@]}" --resume "$tmp/part/checkpoint.safetensors" --out "$tmp/part" \
  >/dev/null 2>&1 || fail "accum resume"
diff <(cut -d, -f1-4 "$tmp/whole/epochs.csv") <(cut -d, -f1-4 "$tmp/part/epochs.csv") >/dev/null ||
  fail "resumed epochs.csv differs: $(cat "$tmp/whole/epochs.csv" "$tmp/part/epochs.csv")"
"$bin" "${acc[@]}" --max-iters 4 --out "$tmp/part2" >/dev/null 2>&1 || fail "accum part2"
sum=$(md5sum <"$tmp/part2/checkpoint.safetensors")
for m in 4 2; do
  expect_error "max_iters$m" 1 "is at step 4: --max-iters $m leaves nothing to train" \
    "$bin" "${acc[@]}" --max-iters $m --resume "$tmp/part2/checkpoint.safetensors" --out "$tmp/part2"
done
[[ $(md5sum <"$tmp/part2/checkpoint.safetensors") == "$sum" ]] || fail "a refused resume changed the checkpoint"
expect_error epochs_done 1 "has completed 1 epoch(s): --epochs 1 leaves nothing to train" \
  "$bin" "${acc[@]}" --resume "$tmp/whole/checkpoint.safetensors" --out "$tmp/whole"
python3 - "$tmp/part2/checkpoint.safetensors" "$tmp/huge.safetensors" <<'EOF' || fail "editing step"
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
h['__metadata__']['step'] = str(2**63 - 1)
h['__metadata__'].pop('sparsetrain.xxh3_64', None)
hb = json.dumps(h).encode()
hb += b' ' * (-len(hb) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])
EOF
expect_error huge_step 1 "checkpoint metadata 'step' is 9223372036854775807, more than the 2^53 steps" \
  "$bin" "${acc[@]}" --resume "$tmp/huge.safetensors" --out "$tmp/huge"
echo "run_integrity_test: ok"
