#!/usr/bin/env bash
# One line naming the real cause, or a note saying what is recomputed, where a resume, an
# evaluation or a listing meets something unexpected:
#  - a mid-epoch checkpoint with damaged, missing or inconsistent epoch sums, an
#    impossible step, a world_size its sparsifier rows contradict, a --plan auto
#    checkpoint without its plan;
#  - a refusal after the checkpoint is read comes alone (no re-split note before it);
#  - damaged metrics rows are dropped by the resume's cut-back, with a note; a resume in
#    another --metrics-format says the history is split;
#  - eval of a checkpoint whose arch this build lacks, on another dataset, or of a
#    safetensors file without metadata (with --arch);
#  - the stop after a NaN names the step of the checkpoint it points to, and says when
#    that checkpoint holds the very weights that failed;
#  - a folder with a run but no checkpoint is not answered with --resume of a missing
#    file; a second stop signal before any checkpoint does not claim one was kept; a
#    stop signal during start-up stops the run after its first step, with a checkpoint;
#  - a listing, --help or --version that cannot be written exits non-zero;
#  - --sp integer ranges and --synthetic-size name their real upper bounds.
#   tests/apps/resume_messages_test.sh path/to/sparsetrain path/to/mpirun
set -uo pipefail
# bin, mpirun, a scratch folder as the working one, fail and expect:
# shellcheck source=tests/apps/cli_test.sh
source "$(dirname "$(realpath "$0")")/cli_test.sh" "$@"
common=(--dataset synthetic --synthetic-size 64 --test-subset 16 --eval-batches 1 --workers 0
        --threads 1 -q)
run=(train "${common[@]}" -b 16)
run8=(train "${common[@]}" -b 8)  # 4 steps an epoch on 2 ranks
mpi() { timeout 120 "$mpirun" --allow-run-as-root --oversubscribe "$@"; }

# expect2 NAME MESSAGE CMD...: under 2 ranks, a non-zero exit and a rank's line with MESSAGE.
expect2() {
  local name=$1 msg=$2
  shift 2
  "$@" >"$name.log" 2>&1 && fail "$name: exit code 0: $(tail -n 2 "$name.log")"
  grep -F -- "$msg" "$name.log" | grep -q "^sparsetrain: error on rank [01] of 2: " ||
    fail "$name: no rank's line with '$msg': $(cat "$name.log")"
}
# note NAME MESSAGE CMD...: exit 0 and a note holding MESSAGE.
note() {
  local name=$1 msg=$2
  shift 2
  "$@" >"$name.log" 2>&1 || fail "$name: failed: $(cat "$name.log")"
  grep -qF -- "note: " "$name.log" && grep -qF -- "$msg" "$name.log" ||
    fail "$name: no note with '$msg': $(cat "$name.log")"
}
# edit IN OUT KEY VALUE: a copy of a checkpoint with one metadata value changed
# ("-" removes the key); the data checksum still holds.
edit() {
  /usr/bin/python3 - "$@" <<'PY' || fail "editing a checkpoint"
import json, struct, sys
src, dst, key, value = sys.argv[1:5]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
meta = header["__metadata__"]
if value == "-":
    meta.pop(key, None)
else:
    meta[key] = value
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
}

# A mid-epoch checkpoint of 2 ranks (4 steps an epoch), with MiCRO's state.
mpi -np 2 "$bin" "${run8[@]}" --max-iters 1 --sparsifier micro --density 0.1 --out mid \
  >mid.log 2>&1 || fail "2-rank run: $(cat mid.log)"
ck=mid/checkpoint.safetensors
more=("${run8[@]}" --max-iters 3 --sparsifier micro --density 0.1)
edit "$ck" sums.safetensors epoch_sums_by_rank "1 2 x;3 4 1"
expect2 sums_damaged "checkpoint metadata 'epoch_sums_by_rank' holds '1 2 x'" \
  mpi -np 2 "$bin" "${more[@]}" --out a1 --resume sums.safetensors
edit "$ck" total.safetensors epoch_sums "999 1 0"
expect2 sums_total "'epoch_sums_by_rank' adds up to another total than 'epoch_sums'" \
  mpi -np 2 "$bin" "${more[@]}" --out a2 --resume total.safetensors
edit "$ck" none1.safetensors epoch_sums_by_rank -
edit none1.safetensors none.safetensors epoch_sums -
note sums_missing "holds no epoch sums (metadata 'epoch_sums')" \
  mpi -np 2 "$bin" "${more[@]}" --out a3 --resume none.safetensors
edit "$ck" step.safetensors step 0
expect2 step_impossible "checkpoint metadata 'step' is 0, fewer than its position allows" \
  mpi -np 2 "$bin" "${more[@]}" --out a4 --resume step.safetensors
# An epoch-end checkpoint re-splits for 1 rank; its world_size must match the rows.
mpi -np 2 "$bin" "${run8[@]}" --max-iters 4 --sparsifier micro --density 0.1 --out end \
  >end.log 2>&1 || fail "2-rank run to the epoch end: $(cat end.log)"
edit end/checkpoint.safetensors world.safetensors world_size 3
expect world_rows "checkpoint metadata 'world_size' is 3 but sparsify.state holds the rows of 2" \
  "$bin" "${run[@]}" --max-iters 6 --sparsifier micro --density 0.1 --out a5 --resume world.safetensors
# A method this build does not have (the exchange setup checks the checkpoint's method).
edit end/checkpoint.safetensors method.safetensors sparsifier nosuch
expect unknown_method "checkpoint metadata 'sparsifier' is 'nosuch', which this build does not know" \
  "$bin" "${run[@]}" --max-iters 6 --sparsifier micro --density 0.1 --out a8 --resume method.safetensors
# Nothing left to train: refused alone, before the re-split note.
expect nothing_left "leaves nothing to train" \
  "$bin" "${run[@]}" --max-iters 4 --sparsifier micro --density 0.1 --out a6 \
  --resume end/checkpoint.safetensors
"$bin" "${run[@]}" --max-iters 1 --sparsifier topk --density 0.1 --plan auto --out plan \
  >plan.log 2>&1 || fail "--plan auto run: $(cat plan.log)"
edit plan/checkpoint.safetensors noplan.safetensors exchange_plan -
note plan_missing "holds no exchange plan (metadata 'exchange_plan')" \
  "$bin" "${run[@]}" --max-iters 2 --sparsifier topk --density 0.1 --plan auto --out a7 \
  --resume noplan.safetensors

# The cut-back drops torn rows; another --metrics-format splits the history, said once.
"$bin" "${run[@]}" --max-iters 2 --out m >/dev/null 2>&1 || fail "run m"
printf 'garbage\n\0\0\0\n1,2\n' >>m/iterations.csv
note torn_rows "m/iterations.csv: dropped 3 damaged row(s)" \
  "$bin" "${run[@]}" --max-iters 3 --out m --resume m/checkpoint.safetensors
grep -qaE 'garbage|^1,2$' m/iterations.csv && fail "a torn row survived: $(cat -A m/iterations.csv)"
[[ $(tail -n +2 m/iterations.csv | wc -l) -eq 3 ]] || fail "steps 1-3 expected: $(cat m/iterations.csv)"
note other_format "holds the run so far in iterations.csv; this resume writes iterations.jsonl" \
  "$bin" "${run[@]}" --max-iters 4 --out m --resume m/checkpoint.safetensors --metrics-format jsonl

# Evaluation: an arch this build lacks, another dataset, a file without metadata.
edit m/checkpoint.safetensors arch.safetensors arch resnet999
expect eval_arch "checkpoint metadata 'arch' is 'resnet999', a model this build does not have" \
  "$bin" eval arch.safetensors --dataset synthetic --synthetic-size 64
expect eval_dataset "trained on --dataset synthetic, not fashion-mnist" \
  "$bin" eval m/checkpoint.safetensors --dataset fashion-mnist --test-subset 16
/usr/bin/python3 - m/checkpoint.safetensors bare.safetensors <<'PY' || fail "stripping metadata"
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
del header["__metadata__"]
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
"$bin" eval bare.safetensors --arch resnet20 --dataset synthetic --synthetic-size 64 >bare.log 2>&1 ||
  fail "eval of a file without metadata: $(cat bare.log)"
grep -q '"test_acc"' bare.log || fail "no result: $(cat bare.log)"

# fp16 at a huge rate: the loss is NaN right after step 1's checkpoint, which holds the
# weights that failed and is not called good.
expect fp16_nan "The last checkpoint, f/checkpoint.safetensors, holds these same weights (step 1)" \
  "$bin" "${run[@]}" --precision fp16 --lr 1e3 --max-iters 3 --checkpoint-every 1 --out f

# A run that wrote no checkpoint: the rerun is not told to resume one.
mkdir k && echo "step" >k/iterations.csv
expect no_checkpoint "--out k already holds a run (k/iterations.csv) that wrote no checkpoint; pass --overwrite" \
  "$bin" "${run[@]}" --max-iters 1 --out k
grep -q -- "--resume" no_checkpoint.log && fail "a missing checkpoint was named"

# Two stop signals before the first checkpoint: no checkpoint is claimed kept.
"$bin" train --dataset synthetic --synthetic-size 100000 -b 16 --epochs 5 --workers 0 --threads 1 \
  --arch resnet110 -q --out sig >sig.log 2>&1 &
pid=$!
for _ in $(seq 200); do [[ -f sig/.sparsetrain.lock ]] && break; sleep 0.05; done
kill -INT "$pid"
sleep 0.2
kill -INT "$pid"
wait "$pid"
rc=$?
[[ $rc -eq 130 ]] || fail "two SIGINTs: exit $rc, expected 130: $(cat sig.log)"
grep -q "exiting now, before this run wrote a checkpoint" sig.log || fail "second signal: $(cat sig.log)"
[[ -f sig/checkpoint.safetensors ]] && fail "a checkpoint appeared"

# One stop signal during start-up (as soon as the folder is locked, before the first
# step): the run stops after its first step with a checkpoint, not by the default action.
"$bin" train --dataset synthetic --synthetic-size 100000 -b 16 --epochs 5 --workers 0 --threads 1 \
  --arch resnet110 --out early >early.log 2>&1 &
pid=$!
for _ in $(seq 200); do [[ -f early/.sparsetrain.lock ]] && break; sleep 0.01; done
kill -INT "$pid"
wait "$pid"
rc=$?
[[ $rc -eq 130 ]] || fail "SIGINT at start-up: exit $rc, expected 130: $(cat early.log)"
grep -q "interrupted by SIGINT at step 1" early.log || fail "SIGINT at start-up: $(cat early.log)"
[[ -f early/checkpoint.safetensors ]] || fail "no checkpoint after a SIGINT at start-up"

# Output that cannot be written is a failure.
for cmd in "--version" "--help" "sparsifiers" "sparsifiers --json"; do
  read -r -a args <<<"$cmd"
  "$bin" "${args[@]}" >/dev/full 2>full.log && fail "$cmd >/dev/full exited 0"
  grep -q "cannot write to standard output" full.log || fail "$cmd >/dev/full: $(cat full.log)"
  "$bin" "${args[@]}" >&- 2>closed.log && fail "$cmd with stdout closed exited 0"
done

expect sp_bound "blocks takes an integer in [1, 2^53]" \
  "$bin" "${run[@]}" --max-iters 1 --sparsifier exdyna --sp blocks=1e30 --out x
expect synthetic_bound "--synthetic-size must be at most 2147483647" \
  "$bin" train --dataset synthetic --synthetic-size 99999999999 --max-iters 1 --out x
echo "resume_messages_test: ok"
