#!/usr/bin/env bash
# scripts/quickstart.sh without building anything: --dry-run prints every step's command
# (install, configure, build the CLI, train on 2 ranks with MiCRO, plot) and runs none;
# bad arguments are one line and exit code 2.
#   tests/scripts/quickstart_args_test.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
qs=$root/scripts/quickstart.sh

"$qs" --dry-run --build "$tmp/b" --out "$tmp/run" >"$tmp/dry.out" 2>&1 || fail "dry run: $(cat "$tmp/dry.out")"
[[ $(grep -c '^  \$ ' "$tmp/dry.out") -eq 5 ]] || fail "not 5 steps: $(cat "$tmp/dry.out")"
for want in 'scripts/setup.sh --cli' "cmake -S . -B $tmp/b -DCMAKE_BUILD_TYPE=Release -DSPARSETRAIN_CUDA=OFF" \
  "cmake --build $tmp/b --target sparsetrain " \
  "--oversubscribe -np 2 $tmp/b/apps/sparsetrain train --arch resnet20 --dataset fashion-mnist --epochs 1 --sparsifier micro --density 0.01" \
  "scripts/plot.py $tmp/run -o $tmp/run/curves.png" 'dry run, nothing was run'; do
  grep -qF -- "$want" "$tmp/dry.out" || fail "dry run lacks '$want': $(cat "$tmp/dry.out")"
done
[[ ! -e "$tmp/b" && ! -e "$tmp/run" ]] || fail "the dry run wrote files"
"$qs" --dry-run --no-install --np 3 --epochs 2 >"$tmp/opts.out" 2>&1 || fail "options: $(cat "$tmp/opts.out")"
grep -q 'setup.sh' "$tmp/opts.out" && fail "--no-install still installs: $(cat "$tmp/opts.out")"
grep -q -- '-np 3 .* --epochs 2 ' "$tmp/opts.out" || fail "--np/--epochs not used: $(cat "$tmp/opts.out")"
for bad in "--np 0" "--epochs x" "--build" "--colour red"; do
  # shellcheck disable=SC2086
  "$qs" --dry-run $bad >"$tmp/bad.out" 2>"$tmp/bad.err"
  rc=$?
  [[ $rc -eq 2 ]] || fail "'$bad': exit $rc, expected 2"
  [[ $(wc -l <"$tmp/bad.err") -eq 1 && ! -s "$tmp/bad.out" ]] ||
    fail "'$bad': not one line: $(cat "$tmp/bad.out" "$tmp/bad.err")"
done
echo "quickstart_args_test: ok"
