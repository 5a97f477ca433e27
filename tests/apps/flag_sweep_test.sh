#!/usr/bin/env bash
# Every numeric flag of `sparsetrain train` (read from --help: INT, UINT and FLOAT) with
# the values a careless script passes: empty (an unset variable), -1, 0, 1e30, nan, inf
# and a word. Each must end in one line naming the flag, unless the pair is in the list
# below of values with a documented meaning (0 = all / none / off, -1 = measure, a huge
# finite size = one bucket, ...). A pair accepted that is not listed fails the test, so a
# new flag or a loosened check is seen.
#   tests/apps/flag_sweep_test.sh path/to/sparsetrain
set -uo pipefail
bin=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
accepted=" --synthetic-size=0 --image-size=0 --test-subset=0 --workers=0 --seed=0
 --eval-batches=0 --train-subset=0 --lr=1e30 --eps=1e30 --momentum=0 --wd=0 --wd=1e30
 --warmup-epochs=0 --warmup-epochs=1e30 --clip=0 --clip=1e30 --max-iters=0
 --checkpoint-every=0 --checkpoint-minutes=0 --checkpoint-minutes=1e30 --bucket-cap-mb=1e30
 --first-bucket-mb=1e30 --first-layers-first=-1 --dense-warmup-iters=0 "
accepted=" $(echo $accepted) "  # one space between pairs
mapfile -t flags < <("$bin" train --help |
  grep -E '^  (-[a-z],)?--[a-z0-9-]+(,--[a-z-]+)? (INT|UINT|FLOAT)' |
  sed -E 's/^  (-[a-z],)?(--[a-z0-9-]+)(,--[a-z-]+)?.*/\2 \3/')
[[ ${#flags[@]} -ge 30 ]] || fail "found only ${#flags[@]} numeric flags in --help"
checked=0
for entry in "${flags[@]}"; do
  read -r flag alias <<<"$entry"
  alias=${alias#,}
  for v in '' -1 0 1e30 nan inf word; do
    out=$("$bin" train --check-flags --dataset synthetic "$flag" "$v" 2>&1 | grep -v '^Run with --help')
    checked=$((checked + 1))
    if [[ $out == "sparsetrain: flags ok" ]]; then
      [[ $accepted == *" $flag=$v "* ]] || fail "$flag '$v' accepted without a documented meaning"
      continue
    fi
    [[ $(grep -c . <<<"$out") -eq 1 ]] || fail "$flag '$v': more than one line: $out"
    [[ $out == *"$flag"* || ( -n $alias && $out == *"$alias"* ) ]] ||
      fail "$flag '$v': the line does not name the flag: $out"
  done
done
# --betas takes two numbers: both are checked.
for v in '' nan word; do
  out=$("$bin" train --check-flags --dataset synthetic --optimizer adam --betas 0.9 "$v" 2>&1 | head -1)
  [[ $out == *--betas* ]] || fail "--betas 0.9 '$v': $out"
done
echo "flag_sweep_test: ok ($checked flag values, each refused naming its flag or documented)"
