#!/usr/bin/env bash
# Cheap test of scripts/reproduce.sh with a stand-in sparsetrain binary (no MPI,
# no network namespace): the dry run lists the grid, runs write run.json, a second call
# skips finished runs, an interrupted run (no run.json) is redone, a failing run is
# reported and not marked finished, bad configs name the file and line.
#   tests/scripts/reproduce_test.sh   (exit 1 on any failure)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {  # description, then a command that must succeed
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

# A fake build: `sparsetrain sparsifiers --json`, `train --help`, `train --check-flags`
# (refuses --sp colour=...) and a train that writes iterations.csv (10 steps, 0.1 s
# apart) and fails for --sparsifier gtopk.
mkdir -p "$tmp/build/apps"
cat >"$tmp/build/apps/sparsetrain" <<'FAKE'
#!/usr/bin/env bash
case $1 in
  sparsifiers) [[ ${2:-} == --json ]] || exit 2
    echo '{"sparsifiers": [{"name": "topk", "pattern": "union-allreduce", "partitioned": false},'
    echo ' {"name": "micro", "pattern": "union-allreduce", "partitioned": true},'
    echo ' {"name": "gtopk", "pattern": "allgather-sum", "partitioned": false}]}'
    exit 0 ;;
  train) [[ ${2:-} == --help ]] && { echo "  -a,--arch TEXT  model architecture: resnet20, lstm (language model)"; exit 0; } ;;
esac
if [[ " $* " == *" --check-flags "* ]]; then
  [[ " $* " == *" --sp colour="* ]] && { echo "sparsetrain: error: --sp: unknown key 'colour'" >&2; exit 1; }
  echo "sparsetrain: flags ok"
  exit 0
fi
out="" sp=none
while [[ $# -gt 0 ]]; do
  case $1 in --out) out=$2; shift ;; --sparsifier) sp=$2; shift ;; esac
  shift
done
[[ $sp == gtopk ]] && { echo "error: gtopk exploded" >&2; exit 3; }
echo "$sp" >>"$(dirname "$out")/../calls.txt"
{
  echo "epoch,iter,step,loss,wall_s,fwd_ms,bwd_ms,comm_ms,opt_ms,data_ms"
  for i in 1 2 3 4 5 6 7 8 9 10; do
    ms=$([[ $sp == none ]] && echo 0.2 || echo 0.1)
    echo "0,$i,$i,1.0,$(awk -v i="$i" -v m="$ms" 'BEGIN { print i * m }'),10,20,5,1,0"
  done
} >"$out/iterations.csv"
FAKE
chmod +x "$tmp/build/apps/sparsetrain"
cat >"$tmp/grid.conf" <<'CONF'
# two sparsifiers and the dense baseline, one process
train name=g model=resnet20 sparsifiers=none,topk,micro densities=0.01,0.1 ranks=1 bandwidths=none max_iters=10 warmup=2
CONF
run() { "$root/scripts/reproduce.sh" --build "$tmp/build" --out "$tmp/out" --no-report "$@" >"$tmp/log" 2>&1; }

run --config "$tmp/grid.conf" --dry-run
check "dry run lists 5 runs" test "$(grep -c 'would run' "$tmp/log")" -eq 5
check "dry run runs nothing" test ! -e "$tmp/out/calls.txt"
"$root/scripts/reproduce.sh" --build "$tmp/build" --out "$tmp/out" --config "$tmp/grid.conf" >"$tmp/log" 2>&1
check "first call succeeds and runs all 5" test "$(wc -l <"$tmp/out/calls.txt")" -eq 5
check "the binary's sparsifier listing saved for the scaling model" \
  grep -q '"name": "micro", "pattern": "union-allreduce"' "$tmp/out/sparsifiers.json"
check "progress line per run" test "$(grep -c 'done in' "$tmp/log")" -eq 5
check "run.json written" test -f "$tmp/out/g/resnet20_np1_none_micro_d0.1/run.json"
check "summary written" grep -q 'resnet20_np1_none_topk_d0.01' "$tmp/out/summary.md"
# Dense steps take 0.2 s, sparse 0.1 s: speedup 2.00x.
check "speedup table" grep -q '2.00x (100 ms, d' "$tmp/out/speedup.md"
run --config "$tmp/grid.conf"
check "second call skips all" test "$(grep -c 'finished earlier, skipped' "$tmp/log")" -eq 5
check "second call runs nothing" test "$(wc -l <"$tmp/out/calls.txt")" -eq 5
rm "$tmp/out/g/resnet20_np1_none_topk_d0.1/run.json"
run --config "$tmp/grid.conf"
check "interrupted run redone" test "$(wc -l <"$tmp/out/calls.txt")" -eq 6
check "only that one" test "$(tail -1 "$tmp/out/calls.txt")" = topk
# --report-only rebuilds the tables from the run folders alone: no build, no comm_bench.
rm "$tmp/out/summary.md"
"$root/scripts/reproduce.sh" --build "$tmp/no_build" --out "$tmp/out" --report-only \
  --config "$tmp/grid.conf" >"$tmp/log" 2>&1
check "report-only needs no build" test $? -eq 0
check "report-only keeps the saved listing" grep -q '"name": "gtopk"' "$tmp/out/sparsifiers.json"
check "report-only rewrites the summary" grep -q 'resnet20_np1_none_topk_d0.01' "$tmp/out/summary.md"
check "report-only runs nothing" test "$(wc -l <"$tmp/out/calls.txt")" -eq 6
check "report says when the runs were measured" grep -q 'Measured: .* UTC (5 runs)' "$tmp/out/report.md"

printf 'train name=f model=resnet20 sparsifiers=gtopk ranks=1 bandwidths=none max_iters=3\n' >"$tmp/fail.conf"
run --config "$tmp/fail.conf"
rc=$?
check "failing run exits 1" test $rc -eq 1
check "failure reported with the log tail" grep -q 'FAILED (exit 3).*gtopk exploded' "$tmp/log"
check "failed run not marked finished" test ! -e "$tmp/out/f/resnet20_np1_none_gtopk_d0.01/run.json"

bad() {  # config text, expected message
  printf '%s\n' "$1" >"$tmp/bad.conf"
  run --config "$tmp/bad.conf"
  local rc=$?
  check "bad config: $2" bash -c "[[ $rc -eq 2 ]] && grep -qF -- \"$2\" '$tmp/log'"
}
bad '# c
train name=b model=resnet20 sparsifiers=topk ranks=1 bandwidths=none max_iters=3 colour=red' "bad.conf:2: unknown key 'colour'"
bad 'train name=b model=resnet20 sparsifiers=nope ranks=1 bandwidths=none max_iters=3' "bad.conf:1: unknown sparsifier 'nope'"
bad 'train name=b model=resnet99 sparsifiers=topk ranks=1 bandwidths=none max_iters=3' "bad.conf:1: unknown model 'resnet99'"
bad 'train name=b model=resnet20 sparsifiers=topk ranks=2 bandwidths=100mb max_iters=3' "bad.conf:1: bandwidth '100mb'"
bad 'train name=b model=resnet20 sparsifiers=topk ranks=two bandwidths=none max_iters=3' "bad.conf:1: ranks=two: expected integers"
bad 'train name=b model=resnet20 sparsifiers=topk ranks=1 bandwidths=none' "bad.conf:1: give epochs= or max_iters="
bad 'train name=b model=resnet20 sparsifiers=topk ranks=1 bandwidths=1gbit max_iters=3' "bad.conf:1: ranks=1 has no network"
bad 'train name=b model=resnet20 sparsifiers=topk ranks=1 bandwidths=none max_iters=3 sp="up 1.1"' "bad.conf:1: sp: expected key=value pairs, got 'up'"
# A binary file given as the config: one line, no traceback.
printf 'train\x92\xff\x00\n' >"$tmp/binary.conf"
run --config "$tmp/binary.conf"
rc=$?
check "binary config: one line, no traceback" bash -c "[[ $rc -eq 2 ]] && grep -qF 'binary.conf: not a text config' '$tmp/log' && ! grep -q Traceback '$tmp/log'"

# sp= pairs reach the command line as the CLI takes them (`--sp key=value`, one flag per
# pair), and not for the dense baseline.
printf 'train name=s tag=t model=resnet20 sparsifiers=none,micro ranks=1 bandwidths=none max_iters=3 sp="up=1.1 down=0.9"\n' >"$tmp/sp.conf"
run --config "$tmp/sp.conf" --dry-run
check "sp pairs on the sparsified run" grep -q 'micro_d0.01_t: would run: .*--sp up=1.1 --sp down=0.9' "$tmp/log"
check "no sp pairs on the baseline" bash -c "! grep 'none_t: would run' '$tmp/log' | grep -q -- --sp"
# Flags the binary refuses stop the dry run (and a real one) before anything runs.
printf '# ok\ntrain name=k model=resnet20 sparsifiers=micro ranks=1 bandwidths=none max_iters=3 sp="colour=red"\n' >"$tmp/sp_bad.conf"
run --config "$tmp/sp_bad.conf" --dry-run
rc=$?
check "dry run refuses a key the binary refuses" bash -c "[[ $rc -eq 2 ]] && grep -qF \"sp_bad.conf:2: k/resnet20_np1_none_micro_d0.01: --sp: unknown key 'colour'\" '$tmp/log'"
check "dry run lists nothing then" bash -c "! grep -q 'would run' '$tmp/log'"

echo "$fails failure(s)"
[[ $fails -eq 0 ]]
