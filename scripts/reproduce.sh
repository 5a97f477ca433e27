#!/usr/bin/env bash
# The one command that regenerates the reproduction report: runs the grid of a
# config file (sparsifiers x densities x models x rank counts x emulated bandwidths), one
# folder per run, skipping runs that finished earlier, then writes summary.md, speedup.md,
# the figures and the scaling-model fit. Interrupt it any time and run it again to resume.
#   scripts/reproduce.sh [--quick] [--config FILE] [--out DIR] [--build DIR] [--dry-run]
#                        [--only A,B] [--no-report] [--report-only]
#   scripts/reproduce.sh --task NAME [--epochs E] [--np N] [--max-iters K] [--dry-run]
# --task runs one paper task of `sparsetrain tasks` with its command (--epochs shortens it
# for a smoke run) into runs/tasks/NAME, or refuses in one line naming the missing model
# or dataset and where its files go.
# --quick runs scripts/experiments/quick.conf (about 20 minutes on 2 cores) into
# runs/reproduce_quick; the default is scripts/experiments/full.conf into runs/reproduce.
# The build defaults to ./build (or $SPARSETRAIN_BUILD) and needs the sparsetrain and
# comm_bench targets. Emulated links need root (ip netns, tc): see scripts/netns_run.sh.
# Every call that finds the build saves `sparsetrain sparsifiers --json` as
# OUT/sparsifiers.json (the methods' exchange patterns for the scaling model), so
# --report-only needs no build.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/reproduce_lib.py "$@"
