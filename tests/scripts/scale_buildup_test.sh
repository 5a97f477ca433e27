#!/usr/bin/env bash
# Gradient build-up at 16 ranks (oversubscribed): Top-k's union of 16 local selections
# holds more values than MiCRO's exclusive partitions. Runs small_cnn on tiny synthetic
# data for 16 steps with each method at d = 0.01 and checks that the mean actual (global,
# after the union) density over the last 6 steps is higher for topk than for micro, by a
# factor of at least 2. MiCRO uses faster threshold steps (up=1.3 down=0.77; the papers'
# 0.5% steps need hundreds of iterations to leave their start, 1/(2 sqrt k)).
# The comparison is also run with the two runs swapped and must fail there, so the
# assertion is shown to be able to fail.
#   tests/scripts/scale_buildup_test.sh SPARSETRAIN [RANKS]   (exit 1 on any failure)
set -uo pipefail
bin=$(readlink -f "$1")
ranks=${2:-16}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

run() {  # sparsifier, extra flags...
  local sp=$1
  shift
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$bin" train --arch small_cnn \
    --dataset synthetic --synthetic-size 512 --test-subset 16 --eval-batches 1 --threads 1 \
    --workers 0 -b 2 --lr 0.05 --max-iters 16 --sparsifier "$sp" --density 0.01 -q \
    --out "$tmp/$sp" "$@" >"$tmp/$sp.log" 2>&1 || {
    echo "FAIL $sp run on $ranks ranks exited non-zero:"
    tail -5 "$tmp/$sp.log"
    exit 1
  }
}

# Prints both densities; exit 0 when the first run's density is >= 2x the second's.
compare() {  # high_run low_run
  /usr/bin/python3 - "$1" "$2" <<'PY'
import csv, sys
def tail_density(folder):
    rows = list(csv.DictReader(open(folder + "/iterations.csv")))
    if len(rows) < 12:
        sys.exit(f"{folder}: {len(rows)} iterations, expected 16")
    last = [float(r["sp_density"]) for r in rows[-6:]]
    return sum(last) / len(last)
hi, lo = tail_density(sys.argv[1]), tail_density(sys.argv[2])
print(f"     actual density, mean of the last 6 steps: {sys.argv[1].rsplit('/', 1)[-1]} {hi:.4f}, "
      f"{sys.argv[2].rsplit('/', 1)[-1]} {lo:.4f} (ratio {hi / lo:.2f})")
sys.exit(0 if hi >= 2 * lo else 1)
PY
}

run topk
run micro --sp up=1.3 --sp down=0.77
if compare "$tmp/topk" "$tmp/micro"; then
  echo "ok   topk's actual density >= 2x micro's on $ranks ranks"
else
  echo "FAIL topk's actual density is not >= 2x micro's on $ranks ranks"
  fails=$((fails + 1))
fi
if compare "$tmp/micro" "$tmp/topk"; then
  echo "FAIL the swapped comparison passed: the check cannot fail"
  fails=$((fails + 1))
else
  echo "ok   the swapped comparison fails, as it must"
fi
exit $((fails > 0))
