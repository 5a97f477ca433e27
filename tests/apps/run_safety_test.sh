#!/usr/bin/env bash
# What a hostile or hurried user meets on the command line, each ending in one clear
# line and a non-zero exit (or the documented behaviour):
#  - out-of-range flags name the flag; --sp without a sparsifier; an unknown dataset;
#    --precision / --comm-dtype values and combinations that are not implemented;
#  - a second run into the same --out is refused (--resume continues, --overwrite replaces);
#  - SIGINT finishes the step, writes a checkpoint and exits 130; resuming it reproduces
#    the uninterrupted run bit for bit, and no metrics row appears twice;
#  - a dense resume of a sparsified checkpoint, a mid-epoch resume with another batch
#    size, and eval with another --arch are refused;
#  - --help lists the flags (the language model's among them) with their help;
#  - with mpirun: ranks started with different flags stop with the first difference
#    (an LSTM flag too, in one line naming the flag and the ranks),
#    and a 2-rank run's test loss equals eval of its checkpoint (BatchNorm buffers).
#   tests/apps/run_safety_test.sh path/to/sparsetrain path/to/mpirun
set -uo pipefail
bin=$1
mpirun=${2:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
base=(train --arch resnet20 -b 8 --threads 1 --workers 0 -q)
common=("${base[@]}" --dataset synthetic --synthetic-size 96 --test-subset 16)
# Long enough (2 x 60 steps) for a signal to land mid-epoch.
long=("${base[@]}" --dataset synthetic --synthetic-size 480 --test-subset 16 --epochs 2
      --checkpoint-minutes 0)

# expect_error NAME EXIT_CODE MESSAGE ARGS...: the run exits with EXIT_CODE and one line
# holding MESSAGE.
expect_error() {
  local name=$1 code=$2 msg=$3
  shift 3
  "$bin" "$@" >"$tmp/$name.log" 2>&1
  local rc=$?
  [[ $rc -eq $code ]] || fail "$name: exit code $rc, expected $code: $(tail -n 3 "$tmp/$name.log")"
  grep -qF -- "$msg" "$tmp/$name.log" || fail "$name: message lacks '$msg': $(cat "$tmp/$name.log")"
  [[ $(grep -c . "$tmp/$name.log") -eq 1 ]] || fail "$name: more than one line: $(cat "$tmp/$name.log")"
}

expect_error log_every 1 "--log-every must be at least 1, got 0" "${common[@]}" --log-every 0 --out "$tmp/x"
expect_error clip_nan 2 "--clip: 'nan' is not a finite number" "${common[@]}" --clip nan --out "$tmp/x"
expect_error test_subset 1 "--test-subset must be at least 0, got -5" "${base[@]}" --dataset synthetic --test-subset -5 --out "$tmp/x"
expect_error max_iters 1 "--max-iters must be at least 0, got -3" "${common[@]}" --max-iters -3 --out "$tmp/x"
expect_error lr_inf 2 "--lr: 'inf' is not a finite number" "${common[@]}" --lr inf --out "$tmp/x"
expect_error first_bucket 1 "--first-bucket-mb must be greater than 0 and finite, got -1" "${common[@]}" --first-bucket-mb -1 --out "$tmp/x"
expect_error sp_alone 1 "--sp needs a --sparsifier" "${common[@]}" --sp hi=1.2 --out "$tmp/x"
expect_error dataset 1 "unknown --dataset 'cifar11'" "${base[@]}" --dataset cifar11 --out "$tmp/x"
expect_error precision 1 "unknown --precision 'fp8'; valid: fp32, bf16, fp16" "${common[@]}" --precision fp8 --out "$tmp/x"
expect_error fp16_sparse 1 "--precision fp16 (loss scaling) needs the dense exchange" "${common[@]}" --precision fp16 --sparsifier topk --out "$tmp/x"
expect_error wire_sparse 1 "--comm-dtype bf16 sets the dense exchange's format" "${common[@]}" --comm-dtype bf16 --sparsifier topk --out "$tmp/x"
[[ ! -e "$tmp/x" ]] || fail "a refused run created its --out folder"

# A finished run, then the same --out again.
"$bin" "${long[@]}" --out "$tmp/full" >"$tmp/full.log" 2>&1 || fail "full run: $(tail -n 3 "$tmp/full.log")"
rows=$(wc -l <"$tmp/full/iterations.csv")
expect_error reuse 1 "already holds a run" "${long[@]}" --out "$tmp/full"
[[ $(wc -l <"$tmp/full/iterations.csv") -eq $rows ]] || fail "a refused run changed iterations.csv"
"$bin" "${common[@]}" --epochs 1 --max-iters 2 --overwrite --out "$tmp/full2" >/dev/null 2>&1 || fail "--overwrite into a fresh folder"

# SIGINT mid-epoch, then resume: the same rows as the uninterrupted run, none twice.
# --checkpoint-minutes 0 keeps the only mid-run checkpoint the one the signal writes.
"$bin" "${long[@]}" --out "$tmp/int" >"$tmp/int.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [[ -f "$tmp/int/iterations.csv" && $(wc -l <"$tmp/int/iterations.csv") -ge 4 ]] && break
  sleep 0.05
done
kill -INT $pid
wait $pid
rc=$?
[[ $rc -eq 130 ]] || fail "SIGINT: exit code $rc, expected 130: $(tail -n 3 "$tmp/int.log")"
grep -q "interrupted by SIGINT at step" "$tmp/int.log" || fail "SIGINT line missing: $(cat "$tmp/int.log")"
[[ -f "$tmp/int/checkpoint.safetensors" ]] || fail "SIGINT left no checkpoint"
"$bin" "${long[@]}" --out "$tmp/int" --resume "$tmp/int/checkpoint.safetensors" >"$tmp/res.log" 2>&1 ||
  fail "resume after SIGINT: $(tail -n 3 "$tmp/res.log")"
losses() { cut -d, -f1-5 "$1"; }  # epoch, iter, step, loss, acc: no timings
diff <(losses "$tmp/full/iterations.csv") <(losses "$tmp/int/iterations.csv") >/dev/null ||
  fail "interrupted + resumed rows differ from the uninterrupted run"
[[ $(cut -d, -f3 "$tmp/int/iterations.csv" | sort | uniq -d | wc -l) -eq 0 ]] || fail "a step appears twice"
diff <(cut -d, -f1-6 "$tmp/full/epochs.csv") <(cut -d, -f1-6 "$tmp/int/epochs.csv") >/dev/null ||
  fail "epochs.csv differs: $(cat "$tmp/int/epochs.csv")"

# Resumes that would silently change the run.
"$bin" "${common[@]}" --epochs 1 --max-iters 3 --sparsifier micro --out "$tmp/micro" >/dev/null 2>&1 || fail "micro run"
expect_error dense_resume 1 "resuming it dense would drop those residuals" "${common[@]}" --epochs 1 \
  --resume "$tmp/micro/checkpoint.safetensors" --out "$tmp/micro_dense"
"$bin" "${common[@]}" --epochs 1 --max-iters 3 --out "$tmp/b8" >/dev/null 2>&1 || fail "b8 run"
expect_error batch_resume 1 "resumes only with the same -b/--batch-size" train --arch resnet20 -b 16 \
  --threads 1 --workers 0 --dataset synthetic --synthetic-size 96 --test-subset 16 --epochs 1 \
  --resume "$tmp/b8/checkpoint.safetensors" --out "$tmp/b16"
expect_error eval_arch 1 "the checkpoint is a resnet20, not --arch resnet32" eval --arch resnet32 \
  --dataset synthetic --synthetic-size 96 --test-subset 16 -b 8 --threads 1 --workers 0 "$tmp/b8/checkpoint.safetensors"

# A full disk at save (a file-size limit stands in for it): one line naming the file, no
# temporary file left, and the previous checkpoint still loads.
before=$(md5sum <"$tmp/b8/checkpoint.safetensors")
(trap '' XFSZ; ulimit -f 200; exec "$bin" "${common[@]}" --epochs 2 --out "$tmp/b8" \
  --resume "$tmp/b8/checkpoint.safetensors") >"$tmp/full_disk.log" 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "full disk: exit code $rc, expected 1: $(cat "$tmp/full_disk.log")"
grep -q "checkpoint.safetensors.*File too large" "$tmp/full_disk.log" || fail "full disk message: $(cat "$tmp/full_disk.log")"
[[ -z $(find "$tmp/b8" -name '*.tmp*') ]] || fail "a temporary file was left: $(ls "$tmp/b8")"
[[ $(md5sum <"$tmp/b8/checkpoint.safetensors") == "$before" ]] || fail "the previous checkpoint changed"
"$bin" eval --dataset synthetic --synthetic-size 96 --test-subset 16 -b 8 --threads 1 --workers 0 \
  "$tmp/b8/checkpoint.safetensors" >/dev/null 2>&1 || fail "the previous checkpoint does not load"

# Multi-rank: flags that differ between ranks, and evaluation of the saved model.
mpi=("$mpirun" --allow-run-as-root --oversubscribe)
"${mpi[@]}" -np 1 "$bin" "${common[@]}" --epochs 1 --out "$tmp/mix" --sparsifier topk : \
  -np 1 "$bin" "${common[@]}" --epochs 1 --out "$tmp/mix" >"$tmp/mix.log" 2>&1
[[ $? -ne 0 ]] || fail "ranks with different --sparsifier did not fail"
grep -q "was started with --sparsifier" "$tmp/mix.log" || fail "mixed flags message: $(cat "$tmp/mix.log")"

# The flag table (train/flags.cpp) from the command line: --help lists each flag with its
# help, --check-flags applies its ranges, and ranks started with another LSTM hidden size
# are refused in one line naming the flag and the ranks, before any training.
"$bin" train --help >"$tmp/help.txt" || fail "train --help exited $?"
for flag in --arch --batch-size --lr --betas --no-augment --sp --layers --hidden --emsize \
  --bptt --dropout --tied; do
  grep -qE -- "(^|[ ,])$flag([ ,=]|$)" "$tmp/help.txt" || fail "--help lacks $flag"
done
grep -qF -- "LSTM hidden units (--arch lstm)" "$tmp/help.txt" || fail "--help lacks --hidden's help"
"$bin" train --arch lstm --check-flags >"$tmp/ok.log" 2>&1 || fail "--check-flags: $(cat "$tmp/ok.log")"
grep -qF "flags ok" "$tmp/ok.log" || fail "--check-flags printed $(cat "$tmp/ok.log")"
expect_error lm_momentum 1 "--momentum must be below 1, got 1" train --arch lstm --momentum 1 --check-flags

# A tiny corpus, so rank 0 would have something to train on.
mkdir -p "$tmp/corpus"
for split in train valid test; do
  for i in $(seq 40); do echo "the cat sat on the mat and the dog ran $i"; done >"$tmp/corpus/$split.txt"
done
lm=(train --arch lstm --dataset text --data-dir "$tmp/corpus" --emsize 8 --bptt 5 -b 2 --epochs 1
    --threads 1 --workers 0 -q --out "$tmp/lm_run")
"${mpi[@]}" -np 1 "$bin" "${lm[@]}" --hidden 8 : \
  -np 1 "$bin" "${lm[@]}" --hidden 16 >"$tmp/lm_mix.log" 2>&1
[[ $? -ne 0 ]] || fail "ranks with different --hidden did not fail"
grep -qF "error on rank 1 of 2: rank 1 was started with --hidden '16', which differs from rank 0's" \
  "$tmp/lm_mix.log" || fail "mixed --hidden message: $(cat "$tmp/lm_mix.log")"
[[ $(grep -c "sparsetrain: error" "$tmp/lm_mix.log") -eq 1 ]] ||
  fail "more than one error line: $(cat "$tmp/lm_mix.log")"
[[ ! -e "$tmp/lm_run/checkpoint.safetensors" ]] || fail "a checkpoint was written"

"${mpi[@]}" -np 2 "$bin" "${common[@]}" --epochs 1 --out "$tmp/two" >"$tmp/two.log" 2>&1 ||
  fail "2-rank run: $(tail -n 3 "$tmp/two.log")"
"${mpi[@]}" -np 2 "$bin" eval --dataset synthetic --synthetic-size 96 --test-subset 16 -b 8 --threads 1 \
  --workers 0 "$tmp/two/checkpoint.safetensors" >"$tmp/eval.log" 2>&1 || fail "eval: $(cat "$tmp/eval.log")"
[[ $(grep -c test_loss "$tmp/eval.log") -eq 1 ]] || fail "eval under mpirun printed $(grep -c test_loss "$tmp/eval.log") results"
logged=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="test_loss") c=i} NR==2{print $c}' "$tmp/two/epochs.csv")
evaluated=$(sed -E 's/.*"test_loss":([0-9.eE+-]+).*/\1/' "$tmp/eval.log")
python3 -c "import sys; a,b=float('$logged'),float('$evaluated'); sys.exit(abs(a-b) > 1e-4*abs(a))" ||
  fail "2-rank test loss $logged != eval of its checkpoint $evaluated"
echo "run_safety_test: ok (2-rank test loss $logged, eval $evaluated)"
