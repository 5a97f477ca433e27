#!/usr/bin/env bash
# The CIFAR GoogLeNet, SENet-18, SE-ResNet-18, ResNet-18, ResNet-152 and Inception-v4
# against their PyTorch twins (bench/torch_cifar_models.py): each model's weights, an
# input and its logits (training mode, dropout off) go into a safetensors file, the twin
# loads the weights by name and must give the same logits within 1e-4 of the largest one.
# ResNet-152 and Inception-v4 at initialisation lose more than that to float32 itself
# (torch's own float32 logits are a few 1e-4 from its float64 ones), so theirs must be
# within 1e-4 or 8 times torch float32's distance from a float64 twin; a wrong kernel,
# padding or branch order moves the logits by a tenth of their size or more.
# NCF (torch_ncf.py) the same on random (user, item) pairs, at 50 users x 40 items and at
# MovieLens-20M's 138,493 x 26,744, where the twin must count 31,832,577 parameters.
# Skipped (exit 77) where torch is not installed.
#   tests/models/torch_twin_test.sh path/to/model_logits path/to/torch_cifar_models.py
set -uo pipefail
logits_bin=$1
twin=$2
python=/usr/bin/python3
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "SKIP: torch is not installed for $python"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for run in googlenet:10 senet18:10 se_resnet18:100 resnet18_cifar:10 resnet152_cifar:10:deep \
  inception_v4:100:deep ncf:50,40 ncf:138493,26744; do
  IFS=: read -r arch classes depth <<<"$run"
  extra=()
  [[ $depth == deep ]] && extra=(--float32-noise 8)
  "$logits_bin" "$arch" "$classes" "$tmp/$arch.safetensors" 2 7 ||
    { echo "FAIL: model_logits $arch $classes"; exit 1; }
  "$python" "$twin" check "$tmp/$arch.safetensors" --rtol 1e-4 "${extra[@]}" ||
    { echo "FAIL: $arch"; exit 1; }
done
count=$("$python" "$twin" count ncf 138493,26744)
[[ $count == 31832577 ]] || { echo "FAIL: the ncf twin counts $count parameters, not 31832577"; exit 1; }
