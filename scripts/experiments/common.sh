# Sourced by the run scripts in this folder: the repository root as working directory,
# the build directory (the script's first argument, default build), the binary and the
# mpirun prefix. The remaining arguments (run names) are left in "$@".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build}
shift || true
bin=$build/apps/sparsetrain
mpi=(mpirun --allow-run-as-root --oversubscribe)
# Epochs a run folder already holds (0 when it has none): finished runs are skipped.
done_epochs() { [[ -f runs/$1/epochs.csv ]] && echo $(($(wc -l <"runs/$1/epochs.csv") - 1)) || echo 0; }
