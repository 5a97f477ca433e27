#!/usr/bin/env bash
# Resuming on another number of ranks, from the command line:
#  - a MiCRO run on 2 ranks resumed on 4 at an epoch end, then on 2 again: each resume
#    notes that the residual sums over the ranks were kept (checked here to 1e-5 of the
#    largest sum), and the epochs continue with each world's own steps per epoch;
#  - a dense run resumes on another world size at an epoch end;
#  - refused in one line: a mid-epoch checkpoint on another world size (naming the last
#    epoch end, kept as epoch_end.safetensors, when there is one, which then resumes), and
#    VGC (per-rank variances) on another world size;
#  - two levels: a state of 2 nodes x 2 ranks is refused on 1 node x 2 ranks (each rank's
#    residuals belong to its slice), while one node to one node re-splits as flat;
#  - --plan auto: the bucket cap the plan chose (not the flag's) and its per-bucket choices
#    are kept on resume, whatever --bucket-cap-mb the resuming command passes.
#   tests/apps/resume_world_test.sh path/to/sparsetrain path/to/mpirun
set -uo pipefail
bin=$1
mpirun=${2:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() { # run NP LOG ARGS...
  local np=$1 log=$2
  shift 2
  OMP_NUM_THREADS=1 "$mpirun" --allow-run-as-root --oversubscribe -np "$np" "$bin" train "$@" \
    >"$tmp/$log.log" 2>&1
}
# 512 examples of 16 per rank: 16 steps per epoch on 2 ranks, 8 on 4.
common=(--arch small_cnn --dataset synthetic --synthetic-size 512 -b 16 --workers 0 --threads 1
        --lr 0.02 --first-bucket-mb 0.002 --bucket-cap-mb 0.01 -q)

# check_note LOG FROM TO: the re-split note, with the largest difference small.
check_note() {
  local line
  line=$(grep "re-split over $3" "$tmp/$1.log") || fail "$1: no re-split note: $(cat "$tmp/$1.log")"
  [[ $line == *"state of $2 ranks re-split over $3"* ]] || fail "$1: $line"
  python3 - "$line" <<'PY' || fail "$1: residual sums not kept: $line"
import re, sys
m = re.search(r"largest difference ([0-9.e+-]+), largest \|sum\| ([0-9.e+-]+)", sys.argv[1])
diff, top = float(m.group(1)), float(m.group(2))
sys.exit(0 if top > 0 and diff <= 1e-5 * top else 1)
PY
}

micro=("${common[@]}" --sparsifier micro --density 0.05 --out "$tmp/micro")
run 2 micro1 "${micro[@]}" --epochs 1 || fail "micro on 2 ranks: $(tail -n 3 "$tmp/micro1.log")"
run 4 micro2 "${micro[@]}" --epochs 2 --resume "$tmp/micro/checkpoint.safetensors" ||
  fail "micro resumed on 4 ranks: $(tail -n 3 "$tmp/micro2.log")"
check_note micro2 2 4
run 2 micro3 "${micro[@]}" --epochs 3 --resume "$tmp/micro/checkpoint.safetensors" ||
  fail "micro resumed on 2 ranks: $(tail -n 3 "$tmp/micro3.log")"
check_note micro3 4 2
steps=$(cut -d, -f1,2 "$tmp/micro/epochs.csv" | tail -n +2 | tr '\n' ' ')
[[ $steps == "0,16 1,24 2,40 " ]] || fail "micro epochs (epoch,step): $steps"

dense=("${common[@]}" --out "$tmp/dense")
run 2 dense1 "${dense[@]}" --epochs 1 || fail "dense on 2 ranks: $(tail -n 3 "$tmp/dense1.log")"
run 4 dense2 "${dense[@]}" --epochs 2 --resume "$tmp/dense/checkpoint.safetensors" ||
  fail "dense resumed on 4 ranks: $(tail -n 3 "$tmp/dense2.log")"
steps=$(cut -d, -f1,2 "$tmp/dense/epochs.csv" | tail -n +2 | tr '\n' ' ')
[[ $steps == "0,16 1,24 " ]] || fail "dense epochs (epoch,step): $steps"

# expect_refusal LOG MESSAGE: the run failed, and rank 0 said MESSAGE in its one line.
# Every rank refuses with the same line; the first rank to fail ends the job (MPI_Abort),
# so which ranks get to print theirs depends on timing: one line is enough.
expect_refusal() {
  grep -E "error on rank [0-9]+ of" "$tmp/$1.log" | grep -qF -- "$2" ||
    fail "$1: no rank's error line says '$2': $(cat "$tmp/$1.log")"
}
mid=("${common[@]}" --out "$tmp/mid")
run 2 mid1 "${mid[@]}" --epochs 1 --max-iters 5 || fail "mid-epoch stop: $(tail -n 3 "$tmp/mid1.log")"
run 4 mid2 "${mid[@]}" --epochs 1 --resume "$tmp/mid/checkpoint.safetensors" && fail "mid-epoch resume on 4 ranks ran"
expect_refusal mid2 "a mid-epoch checkpoint with world_size 2 resumes only with the same world_size, not 4 (a checkpoint at an epoch end can)"

# Lost a node mid-epoch: the refusal names the last epoch end, kept beside the checkpoint,
# which resumes on 4 ranks; the metrics are cut back to it (no step twice).
late=("${common[@]}" --sparsifier micro --density 0.05 --out "$tmp/late")
run 2 late1 "${late[@]}" --epochs 2 --max-iters 20 || fail "2 ranks to step 20: $(tail -n 3 "$tmp/late1.log")"
[[ -s $tmp/late/epoch_end.safetensors ]] || fail "no epoch_end.safetensors after an epoch end"
run 4 late2 "${late[@]}" --epochs 2 --resume "$tmp/late/checkpoint.safetensors" && fail "mid-epoch resume on 4 ranks ran"
expect_refusal late2 "resume the last epoch end, $tmp/late/epoch_end.safetensors, instead"
run 4 late3 "${late[@]}" --epochs 2 --resume "$tmp/late/epoch_end.safetensors" ||
  fail "epoch-end resume on 4 ranks: $(tail -n 3 "$tmp/late3.log")"
check_note late3 2 4
steps=$(cut -d, -f3 "$tmp/late/iterations.csv" | tail -n +2 | tr '\n' ' ')
[[ $steps == "$(seq -s ' ' 1 24) " ]] || fail "late: iteration steps $steps"

vgc=("${common[@]}" --sparsifier vgc --out "$tmp/vgc")
run 2 vgc1 "${vgc[@]}" --epochs 1 || fail "vgc on 2 ranks: $(tail -n 3 "$tmp/vgc1.log")"
run 4 vgc2 "${vgc[@]}" --epochs 2 --resume "$tmp/vgc/checkpoint.safetensors" && fail "vgc resumed on 4 ranks"
expect_refusal vgc2 "--sparsifier vgc keeps a variance accumulator per element on each rank, which cannot be re-split: resume it on 2 ranks, not 4"
two=("${common[@]}" --sparsifier micro --density 0.05 --hierarchy 2 --out "$tmp/two")
run 4 two1 "${two[@]}" --epochs 1 || fail "two levels on 4 ranks: $(tail -n 3 "$tmp/two1.log")"
run 2 two2 "${two[@]}" --epochs 2 --resume "$tmp/two/checkpoint.safetensors" && fail "2x2 state resumed on 2 ranks"
expect_refusal two2 "its two-level exchange ran on 2 nodes x 2 ranks"
one=("${common[@]}" --sparsifier micro --density 0.05 --hierarchy node --out "$tmp/one")
run 4 one1 "${one[@]}" --epochs 1 || fail "one node on 4 ranks: $(tail -n 3 "$tmp/one1.log")"
run 2 one2 "${one[@]}" --epochs 2 --resume "$tmp/one/checkpoint.safetensors" ||
  fail "one node 4 -> 2: $(tail -n 3 "$tmp/one2.log")"
check_note one2 4 2
plan=("${common[@]}" --sparsifier topk --density 0.05 --plan auto --out "$tmp/plan")
run 2 plan1 "${plan[@]}" --epochs 1 || fail "--plan auto: $(tail -n 3 "$tmp/plan1.log")"
saved=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["bucket_cap_mb"], c["exchange_plan"])' "$tmp/plan/config.json")
[[ $saved != "0.01 "* ]] || fail "--plan auto kept the flag's bucket cap: $saved"
run 2 plan2 "${plan[@]}" --epochs 2 --resume "$tmp/plan/checkpoint.safetensors" ||
  fail "--plan auto resumed: $(tail -n 3 "$tmp/plan2.log")"
kept=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["bucket_cap_mb"], c["exchange_plan"])' "$tmp/plan/config.json")
[[ $kept == "$saved" ]] || fail "--plan auto resumed with another plan: $saved -> $kept"
echo "ok: micro 2 -> 4 -> 2, dense 2 -> 4 and one node 4 -> 2 resumed; mid-epoch, vgc and a two-level layout change refused; the plan's bucket cap ($saved) kept"
