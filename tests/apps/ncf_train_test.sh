#!/usr/bin/env bash
# NCF from the CLI (`--arch ncf` on the synthetic implicit-feedback set): HR@10 after a few
# epochs well above a random ranking's 0.10 on 1 rank, and on 2 ranks with MiCRO at
# d = 0.01; the epoch rows carry hr10 and ndcg10; evaluation of the checkpoint on 1 and 2
# ranks repeats the run's figures; the emulated device gives the CPU's losses and
# checkpoint bit for bit; a mid-epoch resume reproduces the uninterrupted run; every
# sparsifier trains it; `models` lists it at MovieLens-20M's size; a bad --dataset and a
# malformed ratings.csv are refused in one line.
#   tests/apps/ncf_train_test.sh path/to/sparsetrain mpiexec
set -uo pipefail
bin=$1
mpiexec=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mpi() { local np=$1; shift; "$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$@"; }
base=(--arch ncf --dataset synthetic-ncf --seed 2 --threads 1 -q)
ncf=("${base[@]}" --synthetic-size 600)
min_hr=0.30  # a random ranking scores 0.10

# hr10 of the JSON line a run prints last.
hr10_of() { tail -1 "$1" | sed -n 's/.*"hr10":\([0-9.]*\).*/\1/p'; }
above() { /usr/bin/python3 -c "import sys; sys.exit(0 if float('$1' or 0) > float('$2') else 1)"; }

"$bin" train "${ncf[@]}" --epochs 3 --out "$tmp/one" >"$tmp/one.log" 2>&1 ||
  fail "1 rank: $(grep -m1 error "$tmp/one.log")"
hr=$(hr10_of "$tmp/one.log")
above "$hr" $min_hr || fail "1 rank: HR@10 $hr after 3 epochs, want > $min_hr: $(tail -1 "$tmp/one.log")"
head -1 "$tmp/one/epochs.csv" | grep -q 'train_acc,test_loss,hr10,ndcg10' ||
  fail "epochs.csv header: $(head -1 "$tmp/one/epochs.csv")"
first=$(sed -n 2p "$tmp/one/epochs.csv" | cut -d, -f6)
last=$(sed -n 4p "$tmp/one/epochs.csv" | cut -d, -f6)
above "$last" "$first" || fail "HR@10 did not rise over the epochs: $first -> $last"

# eval on 1 and 2 ranks: the trained checkpoint's figures again (same split and negatives).
want=$(tail -1 "$tmp/one.log" | sed 's/.*\("test_loss"\)/{\1/')
got=$("$bin" eval "$tmp/one/checkpoint.safetensors" --threads 1 2>&1 | tail -1)
[[ $got == "$want" ]] || fail "eval printed $got, training ended with $want"
got=$(mpi 2 "$bin" eval "$tmp/one/checkpoint.safetensors" --threads 1 2>&1 | tail -1)
[[ $got == "$want" ]] || fail "eval on 2 ranks printed $got, training ended with $want"

# MiCRO at d = 0.01 sends 1% of the gradient: the embeddings start near zero (std 0.01)
# and the run sits at the base rate's loss for about 1,500 steps before it learns the
# groups, so this run takes smaller batches (2,670 steps in 3 epochs, 3,560 in 4).
mpi 2 "$bin" train "${ncf[@]}" --epochs 4 -b 32 --sparsifier micro --density 0.01 --out "$tmp/micro" \
  >"$tmp/micro.log" 2>&1 || fail "2 ranks micro: $(grep -m1 error "$tmp/micro.log")"
hr=$(hr10_of "$tmp/micro.log")
above "$hr" $min_hr || fail "2 ranks micro: HR@10 $hr, want > $min_hr: $(tail -1 "$tmp/micro.log")"

same_run() {  # same_run A B: equal loss column and checkpoint
  cmp -s <(cut -d, -f4 "$1/iterations.csv") <(cut -d, -f4 "$2/iterations.csv") ||
    fail "$2: losses differ from $1"
  /usr/bin/python3 "$root/scripts/compare_checkpoints.py" --rtol 0 \
    "$1/checkpoint.safetensors" "$2/checkpoint.safetensors" >"$tmp/cmp.txt" ||
    fail "$2: checkpoint differs from $1: $(cat "$tmp/cmp.txt")"
}

for dev in cpu emu; do
  mpi 2 "$bin" train "${ncf[@]}" --epochs 1 --max-iters 12 --sparsifier micro --density 0.01 \
    --device $dev --out "$tmp/dev_$dev" >"$tmp/dev_$dev.log" 2>&1 ||
    fail "$dev: $(grep -m1 error "$tmp/dev_$dev.log")"
done
same_run "$tmp/dev_cpu" "$tmp/dev_emu"

# Stopped at step 5 and resumed to step 12: the uninterrupted run's checkpoint.
mpi 2 "$bin" train "${ncf[@]}" --epochs 1 --max-iters 5 --sparsifier micro --density 0.01 \
  --out "$tmp/resume" >"$tmp/resume1.log" 2>&1 || fail "resume part 1: $(grep -m1 error "$tmp/resume1.log")"
mpi 2 "$bin" train "${ncf[@]}" --epochs 1 --max-iters 12 --sparsifier micro --density 0.01 \
  --out "$tmp/resume" --resume "$tmp/resume/checkpoint.safetensors" >"$tmp/resume2.log" 2>&1 ||
  fail "resume part 2: $(grep -m1 error "$tmp/resume2.log")"
/usr/bin/python3 "$root/scripts/compare_checkpoints.py" --rtol 0 "$tmp/dev_cpu/checkpoint.safetensors" \
  "$tmp/resume/checkpoint.safetensors" >"$tmp/cmp.txt" ||
  fail "the resumed run differs from the uninterrupted one: $(cat "$tmp/cmp.txt")"

# Every method of `sparsetrain sparsifiers` trains NCF on 2 ranks (VGC reads the
# embeddings' per-sample squared gradients) and ends with finite figures.
mapfile -t methods < <("$bin" sparsifiers --json | /usr/bin/python3 -c '
import json, sys
for m in json.load(sys.stdin)["sparsifiers"]:
    print(m["name"])')
[[ ${#methods[@]} -gt 10 ]] || fail "sparsifiers --json listed ${#methods[@]} methods"
for m in "${methods[@]}"; do
  mpi 2 "$bin" train "${base[@]}" --synthetic-size 200 --epochs 1 --max-iters 6 --sparsifier "$m" \
    --density 0.05 --out "$tmp/m_$m" >"$tmp/m_$m.log" 2>&1 || fail "$m: $(grep -m1 error "$tmp/m_$m.log")"
  hr=$(hr10_of "$tmp/m_$m.log")
  above "$hr" 0 || fail "$m: no HR@10: $(tail -1 "$tmp/m_$m.log")"
done

# The listing builds the MovieLens-20M model, whatever --classes says.
"$bin" models --json --classes 7 >"$tmp/models.jsonl" 2>&1 || fail "models: $(cat "$tmp/models.jsonl")"
grep -q '^{"name":"ncf","params":31832577,"image_size":0,' "$tmp/models.jsonl" ||
  fail "no ncf line with 31832577 params: $(grep ncf "$tmp/models.jsonl")"

# One-line refusals.
out=$("$bin" train --arch ncf --dataset cifar10 --out "$tmp/bad" 2>&1) && fail "--dataset cifar10 accepted"
[[ $out == *"unknown --dataset 'cifar10' for --arch ncf; valid: synthetic-ncf, movielens"* ]] ||
  fail "bad dataset message: $out"
mkdir -p "$tmp/ml"
printf 'userId,movieId,rating,timestamp\n1,2,3.5,100\n1,2,x\n' >"$tmp/ml/ratings.csv"
out=$("$bin" train --arch ncf --dataset movielens --data-dir "$tmp/ml" --out "$tmp/bad2" 2>&1) &&
  fail "malformed ratings.csv accepted"
[[ $out == *"$tmp/ml/ratings.csv:3: expected userId,movieId,rating,timestamp"* ]] ||
  fail "malformed ratings message: $out"
echo "ncf_train_test: ok"
