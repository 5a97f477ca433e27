#!/usr/bin/env bash
# Training on the emulated accelerator (--device emu) against the CPU: the same command on
# both devices must give the same losses at every step and the same checkpoint bit for bit
# (parameters, optimiser and sparsifier state), since the emulated device runs the CPU
# kernels under a GPU's rules (device memory the host may not read, asynchronous streams
# ordered only by events, a collective that refuses host tensors). Covered: ResNet-20 with
# every method `sparsetrain sparsifiers` lists (after a dense warm-up), dense and MiCRO on
# 4 ranks, the two-level exchange (2 nodes x 2 ranks), the LSTM language model, the 16-bit
# dense exchange, bf16 and fp16 training, accumulation, SyncBN, error feedback turned off, a mid-epoch resume on emu against the uninterrupted CPU run, and
# evaluation, forward overlap; every device in exclusive-process mode (no rank may open a
# context on another's device). With SPARSETRAIN_EMU_DELAY_US set, every stream task is delayed first, which
# turns a missing event or fence into a different result.
#   tests/apps/emu_train_test.sh path/to/sparsetrain mpiexec [quick]
set -uo pipefail
bin=$1
mpiexec=$2
quick=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mpi() { local np=$1; shift; "$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$@"; }
resnet=(--arch resnet20 --dataset synthetic --synthetic-size 512 --image-size 16 -b 16
        --epochs 1 --seed 3 --threads 1 --workers 0 -q)
lstm=(--arch lstm --dataset fortunes --layers 2 --hidden 32 --emsize 32 --bptt 10 -b 4
      --epochs 1 --max-iters 12 --seed 3 --threads 1 --workers 0 -q)

same_run() {  # same_run A B: equal loss column and checkpoint
  cmp -s <(cut -d, -f4 "$1/iterations.csv") <(cut -d, -f4 "$2/iterations.csv") ||
    fail "$2: losses differ from $1: $(paste -d' ' <(cut -d, -f4 "$1/iterations.csv") \
          <(cut -d, -f4 "$2/iterations.csv") | head -6 | tr '\n' ';')"
  /usr/bin/python3 "$root/scripts/compare_checkpoints.py" --rtol 0 \
    "$1/checkpoint.safetensors" "$2/checkpoint.safetensors" >"$tmp/cmp.txt" ||
    fail "$2: checkpoint differs from $1: $(cat "$tmp/cmp.txt")"
}

both() {  # both NAME NP ARGS...: the run on cpu and on emu
  local name=$1 np=$2
  shift 2
  for dev in cpu emu; do
    mpi "$np" "$bin" train "$@" --device $dev --out "$tmp/${name}_$dev" >"$tmp/${name}_$dev.log" 2>&1 ||
      fail "$name on $dev: $(grep -m1 error "$tmp/${name}_$dev.log")"
  done
  same_run "$tmp/${name}_cpu" "$tmp/${name}_emu"
  runs=$((runs + 1))
}

# Every emulated device is in exclusive-process mode, as GPUs on many clusters are: a
# rank that opens a context on another rank's device fails in one line.
mkdir -p "$tmp/node"
export SPARSETRAIN_EMU_EXCLUSIVE_DIR=$tmp/node

runs=0
methods=(none micro topk)
[[ -n $quick ]] || mapfile -t methods < <("$bin" sparsifiers --json | /usr/bin/python3 -c '
import json, sys
for m in json.load(sys.stdin)["sparsifiers"]:
    print(m["name"])')
for m in "${methods[@]}"; do
  both "resnet_$m" 2 "${resnet[@]}" --max-iters 8 --sparsifier "$m" --density 0.05 \
    --dense-warmup-iters 2
done
both micro_np4 4 "${resnet[@]}" --max-iters 8 --sparsifier micro --density 0.02
# Forward overlap: buckets updated on the communication stream while the next forward and
# what is left of backward run on the compute stream.
both fwd_overlap 2 "${resnet[@]}" --max-iters 8 --sparsifier micro --density 0.05 --forward-overlap
both fwd_overlap_dense 2 "${resnet[@]}" --max-iters 8 --forward-overlap
# Two levels on 2 nodes x 2 ranks: groups split on both planes, the reduce-scatter on emu.
both two_level_np4 4 "${resnet[@]}" --max-iters 8 --sparsifier topk --density 0.02 --hierarchy 2
both topk_ef_off 2 "${resnet[@]}" --max-iters 8 --sparsifier topk --density 0.05 --sp ef=off
both lstm_micro 2 "${lstm[@]}" --sparsifier micro --density 0.05
if [[ -z $quick ]]; then
  both dense_np4 4 "${resnet[@]}" --max-iters 8
  both lstm_dense 2 "${lstm[@]}"
  both comm_bf16 2 "${resnet[@]}" --max-iters 8 --comm-dtype bf16
  both prec_bf16 2 "${resnet[@]}" --max-iters 8 --precision bf16
  both prec_fp16 2 "${resnet[@]}" --max-iters 8 --precision fp16
  both accum 2 "${resnet[@]}" --max-iters 8 --accum-steps 2 --sparsifier topk --density 0.05
  both sync_bn 2 "${resnet[@]}" --max-iters 8 --sync-bn
fi

# A mid-epoch resume on emu reproduces the uninterrupted CPU run.
sparse=(--sparsifier micro --density 0.05)
mpi 2 "$bin" train "${resnet[@]}" "${sparse[@]}" --max-iters 5 --device emu --out "$tmp/resume" \
  >"$tmp/resume1.log" 2>&1 || fail "resume part 1: $(grep -m1 error "$tmp/resume1.log")"
mpi 2 "$bin" train "${resnet[@]}" "${sparse[@]}" --max-iters 10 --device emu --out "$tmp/resume" \
  --resume "$tmp/resume/checkpoint.safetensors" >"$tmp/resume2.log" 2>&1 ||
  fail "resume part 2: $(grep -m1 error "$tmp/resume2.log")"
mpi 2 "$bin" train "${resnet[@]}" "${sparse[@]}" --max-iters 10 --device cpu --out "$tmp/whole" \
  >"$tmp/whole.log" 2>&1 || fail "uninterrupted run: $(grep -m1 error "$tmp/whole.log")"
/usr/bin/python3 "$root/scripts/compare_checkpoints.py" --rtol 0 "$tmp/whole/checkpoint.safetensors" \
  "$tmp/resume/checkpoint.safetensors" >"$tmp/cmp.txt" ||
  fail "resumed on emu differs from the uninterrupted cpu run: $(cat "$tmp/cmp.txt")"

# Evaluation on emu (1 and 2 ranks) prints what the CPU prints.
eval_args=(eval "$tmp/whole/checkpoint.safetensors" --arch resnet20 --dataset synthetic
           --synthetic-size 512 --image-size 16 --threads 1)
want=$("$bin" "${eval_args[@]}" --device cpu 2>&1 | tail -1)
[[ $want == *test_loss* ]] || fail "eval on cpu: $want"
got1=$("$bin" "${eval_args[@]}" --device emu 2>&1 | tail -1)
got2=$(mpi 2 "$bin" "${eval_args[@]}" --device emu 2>&1 | tail -1)
[[ $got1 == "$want" && $got2 == "$want" ]] || fail "eval: cpu $want, emu $got1, emu on 2 ranks $got2"
echo "emu_train_test: ok ($runs trainings equal bit for bit, a resume, evaluation)"
