#!/usr/bin/env bash
# scripts/timeline.py and scripts/plot.py on damaged input (a negative duration and
# header-only metrics among them): each case exits non-zero with exactly one line on
# stderr that names the input, no Python traceback, and no picture.
#   tests/scripts/damaged_input_test.sh REPO_ROOT   (exit 1 on any failure)
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

one_line() {  # description, text the line must hold, then the command
  local what=$1 want=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 0 && $(wc -l <"$tmp/err") -eq 1 ]] && ! grep -q Traceback "$tmp/err" &&
    grep -qF -- "$want" "$tmp/err"; then
    echo "ok   $what"
  else
    echo "FAIL $what (exit $rc): $(head -c 400 "$tmp/err")"
    fails=$((fails + 1))
  fi
}

# timeline.py: not JSON, events without the fields a trace has, a list of numbers.
printf '{"traceEvents": [' >"$tmp/cut.json"
echo '{"traceEvents": [{"ph": "X", "name": "forward"}]}' >"$tmp/fields.json"
echo '[1, 2, 3]' >"$tmp/numbers.json"
for f in cut fields numbers; do
  one_line "timeline.py: $f" "$tmp/$f.json" "$py" "$root/scripts/timeline.py" "$tmp/$f.json" \
    -o "$tmp/t.png"
done
one_line "timeline.py: missing file" "missing.json" "$py" "$root/scripts/timeline.py" \
  "$tmp/missing.json" -o "$tmp/t.png"
# A span with a negative duration would be drawn backwards over what came before it.
echo '{"traceEvents": [{"ph": "X", "name": "forward", "pid": 1, "tid": 1, "ts": 5, "dur": -3}]}' \
  >"$tmp/negative.json"
one_line "timeline.py: negative duration" "event 'forward' at ts 5 has a negative duration" \
  "$py" "$root/scripts/timeline.py" "$tmp/negative.json" -o "$tmp/neg.png"
[[ ! -e "$tmp/neg.png" ]] || { echo "FAIL timeline.py drew a negative duration"; fails=$((fails + 1)); }

# plot.py: binary garbage, a JSON line that is not an object, rows without a step column.
mkdir -p "$tmp/garbage" "$tmp/jsonl" "$tmp/columns"
head -c 300 /dev/urandom | tr -d '\n' | sed 's/^/\xff\xfe/' >"$tmp/garbage/iterations.csv"
printf '{"step": 1, "loss": 2}\n[7]\n' >"$tmp/jsonl/iterations.jsonl"
printf 'epoch,loss,wall_s\n0,2.0,1.0\n' >"$tmp/columns/iterations.csv"
one_line "plot.py: garbage csv" "garbage/iterations.csv" "$py" "$root/scripts/plot.py" \
  "$tmp/garbage" -o "$tmp/p.png"
one_line "plot.py: jsonl line not an object" "jsonl/iterations.jsonl" "$py" \
  "$root/scripts/plot.py" "$tmp/jsonl" -o "$tmp/p.png"
one_line "plot.py: no step column" "step" "$py" "$root/scripts/plot.py" "$tmp/columns" \
  -o "$tmp/p.png"
one_line "plot.py --kind times: no step column" "$tmp/columns" "$py" "$root/scripts/plot.py" \
  --kind times "$tmp/columns" -o "$tmp/p.png"
# Headers only (a run stopped before its first step): no empty figure.
mkdir -p "$tmp/headers"
printf 'epoch,iter,step,loss,wall_s\n' >"$tmp/headers/iterations.csv"
printf 'epoch,step,train_loss,test_acc,wall_s\n' >"$tmp/headers/epochs.csv"
for kind in curves times; do
  one_line "plot.py --kind $kind: header-only files" "headers: its" "$py" "$root/scripts/plot.py" \
    --kind "$kind" "$tmp/headers" -o "$tmp/h_$kind.png"
  [[ ! -e "$tmp/h_$kind.png" ]] || { echo "FAIL plot.py wrote an empty figure"; fails=$((fails + 1)); }
done
echo 'not json' >"$tmp/summary.json"
one_line "plot.py --kind speedup: damaged summary" "summary.json" "$py" "$root/scripts/plot.py" \
  --kind speedup "$tmp/summary.json" -o "$tmp/p.png"

echo "$fails failure(s)"
[[ $fails -eq 0 ]]
