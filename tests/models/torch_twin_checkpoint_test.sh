#!/usr/bin/env bash
# Checkpoints against the PyTorch twins (bench/torch_cifar_models.py): each CNN of the
# papers' tables trains 2 steps with `sparsetrain train` on synthetic data, the twin reads
# the checkpoint it wrote (parameters and BatchNorm running statistics by name, the
# optimiser's tensors skipped), must hold exactly what sparsetrain's loader restores, and
# must give the logits `model_logits --checkpoint` gives on the same input in evaluation
# mode, within 1e-4 of the largest. After 2 steps the running statistics are still near
# their initial (0, 1), so ResNet-152's and Inception-v4's evaluation-mode activations
# grow block by block and their logits are large; the comparison is relative to them.
# NCF the same on its default synthetic set of 16 users (model_logits sizes it from the
# checkpoint's tables and feeds it random (user, item) pairs).
# Skipped (exit 77) where torch is not installed.
#   tests/models/torch_twin_checkpoint_test.sh path/to/sparsetrain path/to/model_logits \
#       path/to/torch_cifar_models.py
set -uo pipefail
bin=$1
logits_bin=$2
twin=$3
python=/usr/bin/python3
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "SKIP: torch is not installed for $python"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for arch in googlenet senet18 se_resnet18 resnet18_cifar resnet152_cifar inception_v4 ncf; do
  # 2 steps of 4 images (pairs for ncf), mid-epoch: the checkpoint is written at --max-iters.
  data=(--dataset synthetic --synthetic-size 64 --test-subset 8 --eval-batches 1)
  [[ $arch == ncf ]] && data=(--synthetic-size 16)
  "$bin" train --arch "$arch" "${data[@]}" -b 4 --max-iters 2 \
    --lr 0.05 --workers 0 -q --out "$tmp/$arch" \
    >"$tmp/$arch.log" 2>&1 || { echo "FAIL: training $arch: $(tail -n 3 "$tmp/$arch.log")"; exit 1; }
  ck=$tmp/$arch/checkpoint.safetensors
  [[ -f $ck ]] || { echo "FAIL: $arch wrote no $ck"; exit 1; }
  "$logits_bin" --checkpoint "$ck" "$arch" 10 "$tmp/$arch.logits.safetensors" 2 7 ||
    { echo "FAIL: model_logits --checkpoint $arch"; exit 1; }
  "$python" "$twin" check "$tmp/$arch.logits.safetensors" --checkpoint "$ck" --rtol 1e-4 ||
    { echo "FAIL: $arch"; exit 1; }
done
