#!/usr/bin/env bash
# A first run in one command, from a fresh clone: installs what the CLI needs (Debian
# packages, skipped when present), builds only the `sparsetrain` CLI (Release, no tests,
# no CUDA) into build-quick/, trains ResNet-20 on Fashion-MNIST on 2 MPI ranks with MiCRO
# at density 0.01 for one epoch, and draws its loss and accuracy curves.
#   scripts/quickstart.sh [--build DIR] [--out DIR] [--np N] [--epochs E] [--no-install]
#                         [--dry-run]
# --dry-run checks the arguments and prints each step's command without running any.
# Prints where the checkpoint and the plot are. Timing: README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build-quick out=runs/quickstart np=2 epochs=1 install=1 dry=0
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
fail() { echo "quickstart: $*" >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || fail "$1 needs a value"; }
whole() { [[ $2 =~ ^[1-9][0-9]*$ ]] || fail "$1 must be a whole number >= 1, got '$2'"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) need_value "$@"; build=$2; shift ;;
    --out) need_value "$@"; out=$2; shift ;;
    --np) need_value "$@"; whole "$1" "$2"; np=$2; shift ;;
    --epochs) need_value "$@"; whole "$1" "$2"; epochs=$2; shift ;;
    --no-install) install=0 ;;
    --dry-run) dry=1 ;;
    -h | --help) usage; exit 0 ;;
    *) fail "unknown argument '$1' (see scripts/quickstart.sh --help)" ;;
  esac
  shift
done

launcher=(mpirun --oversubscribe -np "$np")
[[ $(id -u) -eq 0 ]] && launcher=(mpirun --allow-run-as-root --oversubscribe -np "$np")
# ccache, when installed, makes a second clone's build mostly cache hits.
cache=()
command -v ccache >/dev/null && cache=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache
  -DCMAKE_C_COMPILER_LAUNCHER=ccache)
configure=(cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSETRAIN_CUDA=OFF
  -DSPARSETRAIN_TORCH=OFF "${cache[@]}")
compile=(cmake --build "$build" --target sparsetrain -j "$(nproc)")
train=("${launcher[@]}" "$build/apps/sparsetrain" train --arch resnet20
  --dataset fashion-mnist --epochs "$epochs" --sparsifier micro --density 0.01 --threads 1
  --workers 1 --log-every 20 --out "$out" --overwrite)
plot=(/usr/bin/python3 scripts/plot.py "$out" -o "$out/curves.png" --title "ResNet-20, Fashion-MNIST, MiCRO d=0.01, $np ranks")

step() {  # a title, then the command
  local title=$1
  shift
  echo "quickstart: $title"
  echo "  \$ $*"
  ((dry)) || "$@"
}
((install)) && step "installing what the CLI needs (skipped when present)" scripts/setup.sh --cli
export CCACHE_BASEDIR=$PWD # cache entries independent of where the clone lives
step "configuring $build (Release, CPU only)" "${configure[@]}"
step "building the sparsetrain CLI" "${compile[@]}"
step "training ResNet-20 on Fashion-MNIST, $np ranks, MiCRO d = 0.01, $epochs epoch(s)" \
  "${train[@]}"
step "drawing the curves" "${plot[@]}"
if ((dry)); then
  echo "quickstart: dry run, nothing was run"
  exit 0
fi
echo "quickstart: checkpoint $out/checkpoint.safetensors"
echo "quickstart: curves $out/curves.png"
echo "quickstart: evaluate it with $build/apps/sparsetrain eval $out/checkpoint.safetensors"
