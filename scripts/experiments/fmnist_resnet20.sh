#!/usr/bin/env bash
# The Fashion-MNIST ResNet-20 runs behind docs/RESULTS.md. Each run writes
# runs/<name>/{iterations,epochs}.csv; a finished run (epochs.csv has all epochs) is skipped.
#   scripts/experiments/fmnist_resnet20.sh [build-dir] [run-name ...]
source "$(dirname "$0")/common.sh"
common=(--arch resnet20 --dataset fashion-mnist --lr 0.1 --wd 5e-4 --log-every 100)


run() {  # name epochs command...
  local name=$1 epochs=$2
  shift 2
  if [[ $(done_epochs "$name") -ge $epochs ]]; then
    echo "== $name: done, skipped"
    return
  fi
  rm -rf "runs/$name"
  echo "== $name: $*"
  /usr/bin/time -f "$name wall %e s" "$@" --epochs "$epochs" --out "runs/$name" 2>&1 | tail -n 3
}

want() { [[ $# -eq 0 ]] || [[ " ${selected[*]} " == *" $1 "* ]]; }
selected=("$@")

# Training on one process: 2 threads, batch 128, cosine schedule.
want r20_1proc && run r20_1proc 10 "$bin" train "${common[@]}" -b 128 --schedule cosine --threads 2 --workers 2
# Data parallel, dense: 4 ranks x batch 32 (global 128), LR drops at epochs 4 and 5.
dist=(-b 32 --threads 1 --workers 1 --schedule multistep:4,5)
want r20_np4_dense && run r20_np4_dense 6 "${mpi[@]}" -np 4 "$bin" train "${common[@]}" "${dist[@]}"
# Top-k, MiCRO and ExDyna on 4 ranks with the dense run's settings and epoch count.
for d in 0.01 0.001; do
  for sp in topk micro exdyna; do
    want "r20_np4_${sp}_${d}" && run "r20_np4_${sp}_${d}" 6 "${mpi[@]}" -np 4 "$bin" train \
      "${common[@]}" "${dist[@]}" --sparsifier "$sp" --density "$d"
  done
done
# SIDCo at both densities, variance-based compression, FFT, and the quantisers,
# all with their defaults (`sparsetrain sparsifiers`). FFT keeps 10% of the coefficients
# (theta_0 = 0.9, decaying 1% per 1000 iterations); VGC and the quantisers have no density.
want r20_np4_sidco-e_0.01 && run r20_np4_sidco-e_0.01 6 "${mpi[@]}" -np 4 "$bin" train \
  "${common[@]}" "${dist[@]}" --sparsifier sidco-e --density 0.01
want r20_np4_sidco-e_0.001 && run r20_np4_sidco-e_0.001 6 "${mpi[@]}" -np 4 "$bin" train \
  "${common[@]}" "${dist[@]}" --sparsifier sidco-e --density 0.001
want r20_np4_fft_0.1 && run r20_np4_fft_0.1 6 "${mpi[@]}" -np 4 "$bin" train \
  "${common[@]}" "${dist[@]}" --sparsifier fft --density 0.1
for sp in vgc qsgd terngrad; do
  want "r20_np4_${sp}" && run "r20_np4_${sp}" 6 "${mpi[@]}" -np 4 "$bin" train \
    "${common[@]}" "${dist[@]}" --sparsifier "$sp" --density 1
done
# TernGrad without the paper's gradient clipping (its default clips at 2.5 sigma).
want r20_np4_terngrad_clip0 && run r20_np4_terngrad_clip0 6 "${mpi[@]}" -np 4 "$bin" train \
  "${common[@]}" "${dist[@]}" --sparsifier terngrad --density 1 --sp clip=0
# Mixed precision (docs/PRECISION.md): the one-process settings for 4 epochs, in fp32, bf16
# and fp16 (loss-scaled), to compare test accuracy after the same epochs.
for p in fp32 bf16 fp16; do
  want "r20_prec_$p" && run "r20_prec_$p" 4 "$bin" train "${common[@]}" -b 128 --schedule cosine \
    --threads 2 --workers 2 --precision "$p"
done
