#!/usr/bin/env bash
# `sparsetrain tasks`: the text listing and the JSON lines parse, every row's
# architecture is either in `sparsetrain models` (or the language model) or marked
# missing, every runnable row's flags pass `train --check-flags`, data is reported missing
# under an empty $SPARSETRAIN_DATA, and scripts/reproduce.sh --task refuses such a task in
# one line naming the dataset and its folder.
#   tests/apps/tasks_listing_test.sh path/to/sparsetrain
set -uo pipefail
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(dirname "$(dirname "$bin")")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export SPARSETRAIN_DATA=$tmp/empty
mkdir -p "$SPARSETRAIN_DATA"

"$bin" tasks >"$tmp/tasks.txt" 2>"$tmp/err" || fail "tasks: $(cat "$tmp/err")"
"$bin" tasks --json >"$tmp/tasks.jsonl" 2>"$tmp/err" || fail "tasks --json: $(cat "$tmp/err")"
"$bin" models --json >"$tmp/models.jsonl" || fail "models --json"
grep -Eq '^sidco_resnet20_cifar10 +SIDCo +resnet20 +cifar10 +missing +8 +512 +0\.1 +140 +0\.001$' \
  "$tmp/tasks.txt" || fail "no sidco_resnet20_cifar10 row in the text listing: $(cat "$tmp/tasks.txt")"
grep -q '^micro_lstm_wikitext2: mpirun --allow-run-as-root --oversubscribe -np 16 build/apps/sparsetrain train --arch lstm --preset micro_wikitext2 ' \
  "$tmp/tasks.txt" || fail "no command for micro_lstm_wikitext2: $(cat "$tmp/tasks.txt")"

# Each JSON row against the registry; the runnable ones' flags through --check-flags.
/usr/bin/python3 - "$tmp/tasks.jsonl" "$tmp/models.jsonl" "$bin" "$tmp/tasks.txt" <<'PY' || exit 1
import json, subprocess, sys
tasks = [json.loads(l) for l in open(sys.argv[1])]
archs = {json.loads(l)["name"] for l in open(sys.argv[2])} | {"lstm"}
text = open(sys.argv[4]).read()
bad = []
assert len(tasks) == 24, len(tasks)
for t in tasks:
    if t["arch_available"] != (t["arch"] in archs):
        bad.append(f"{t['name']}: arch_available {t['arch_available']} but {t['arch']} "
                   f"{'is' if t['arch'] in archs else 'is not'} in `models`")
    marked = f"{t['arch']}{'+' + t['preset'] if t['preset'] else ''} (missing)" in text
    if marked == t["arch_available"]:
        bad.append(f"{t['name']}: the text listing marks it {'missing' if marked else 'present'}")
    if t["dataset"] != "fashion-mnist" and t["data_present"]:
        bad.append(f"{t['name']}: data_present under an empty SPARSETRAIN_DATA")
    if not t["arch_available"]:
        continue  # its model is not in this build
    cmd = [sys.argv[3], "train"] + t["train_args"] + ["--check-flags"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or "flags ok" not in r.stdout:
        bad.append(f"{t['name']}: --check-flags: {r.stderr.strip()}")
for b in bad:
    print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# reproduce --task refuses a task whose data is missing, in one line, exit 2.
"$root/scripts/reproduce.sh" --build "$build" --task sidco_resnet20_cifar10 --epochs 1 \
  >"$tmp/refuse.out" 2>"$tmp/refuse.err"
rc=$?
[[ $rc -eq 2 ]] || fail "reproduce --task without data: exit $rc, expected 2: $(cat "$tmp/refuse.err")"
[[ $(wc -l <"$tmp/refuse.err") -eq 1 ]] || fail "refusal is not one line: $(cat "$tmp/refuse.err")"
grep -q "needs dataset cifar10, not found: put the CIFAR-10 binary version .* in $SPARSETRAIN_DATA/cifar10" \
  "$tmp/refuse.err" || fail "refusal does not name the dataset and folder: $(cat "$tmp/refuse.err")"
"$root/scripts/reproduce.sh" --build "$build" --task no_such_task >/dev/null 2>"$tmp/unknown.err"
[[ $? -eq 2 ]] && grep -q "unknown task 'no_such_task'; valid: micro_resnet18_cifar_cifar10" \
  "$tmp/unknown.err" || fail "unknown task: $(cat "$tmp/unknown.err")"
# A task whose data is here is run with its command (shown by --dry-run).
"$root/scripts/reproduce.sh" --build "$build" --task standin_micro_resnet20_fmnist --epochs 2 \
  --np 2 --dry-run >"$tmp/dry.out" 2>&1 || fail "dry run of the stand-in: $(cat "$tmp/dry.out")"
grep -q -- "-np 2 $(realpath "$bin") train --arch resnet20 --dataset fashion-mnist -b 32 --lr 0.05 --epochs 2 " \
  "$tmp/dry.out" || fail "stand-in command: $(cat "$tmp/dry.out")"
grep -q -- "--warmup-epochs 0.4 " "$tmp/dry.out" || fail "warm-up not capped: $(cat "$tmp/dry.out")"
echo "tasks_listing_test: ok"
