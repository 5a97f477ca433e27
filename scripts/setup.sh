#!/usr/bin/env bash
# Installs sparsetrain's system dependencies from Debian packages.
# Idempotent and quiet: does nothing (and prints one line) when all are present.
#   scripts/setup.sh         # everything: the CLI, tests, benchmarks, fuzzing, plots
#   scripts/setup.sh --cli   # what configuring and building the CLI, Fashion-MNIST and
#                            # scripts/plot.py need (scripts/quickstart.sh)
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libopenblas-openmp-dev          # CPU GEMM (OpenMP flavour)
  libdnnl-dev                     # oneDNN: CPU convolution
  libopenmpi-dev openmpi-bin      # communication
  libstb-dev zlib1g-dev           # image decoding, gzip
  libjpeg62-turbo-dev             # JPEG decoding (libjpeg-turbo)
  libgtest-dev                    # tests (CMake's configure step looks for it)
  libcli11-dev nlohmann-json3-dev # CLI, JSON
  libfftw3-dev libboost-math-dev  # FFT sparsifier, special functions (SIDCo)
  libxxhash-dev                   # checkpoint checksums (XXH3-64)
  dataset-fashion-mnist           # real data available on Debian
  python3-matplotlib              # plots
)
case "${1:-}" in
  --cli) ;;
  "")
    packages+=(
      libbenchmark-dev                 # benchmarks
      clang libclang-rt-dev libomp-dev # fuzz targets (libFuzzer) and the sanitizer build
      fortunes                         # the language model's default corpus
      python3-numpy                    # replay tests (independent models of the sparsifier rules)
    ) ;;
  *) echo "setup: unknown argument '$1' (none, or --cli)" >&2; exit 2 ;;
esac
# PyTorch: the benchmark peer and the DDP hook extension (pytorch/), whose tests need it;
# never a dependency of the library or the CLI. The full set takes it unless
# SPARSETRAIN_WITH_TORCH=0; --cli only with SPARSETRAIN_WITH_TORCH=1.
with_torch=${SPARSETRAIN_WITH_TORCH:-$([[ -z "${1:-}" ]] && echo 1 || echo 0)}
if [[ "$with_torch" == 1 ]]; then
  packages+=(python3-torch python3-torchvision) # the peers (training step, loader, DDP)
  packages+=(libtorch-dev pybind11-dev)         # the sparsetrain_torch extension
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
