#!/usr/bin/env bash
# The CIFAR GoogLeNet, SENet-18 and SE-ResNet-18 against their PyTorch twins
# (bench/torch_cifar_models.py): each model's weights, an input and its logits go into a
# safetensors file, the twin loads the weights by name and must give the same logits
# within 1e-4 of the largest one. Skipped (exit 77) where torch is not installed.
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
for run in googlenet:10 senet18:10 se_resnet18:100; do
  arch=${run%%:*} classes=${run#*:}
  "$logits_bin" "$arch" "$classes" "$tmp/$arch.safetensors" 2 7 ||
    { echo "FAIL: model_logits $arch $classes"; exit 1; }
  "$python" "$twin" check "$tmp/$arch.safetensors" --rtol 1e-4 || { echo "FAIL: $arch"; exit 1; }
done
