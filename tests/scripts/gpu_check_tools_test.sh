#!/usr/bin/env bash
# The two readers scripts/gpu_check.sh judges GPU runs with, on CPU runs: a checkpoint
# compared with itself passes and with one perturbed parameter fails; the overlap line of
# the committed 2-rank trace.
#   tests/scripts/gpu_check_tools_test.sh REPO_ROOT SPARSETRAIN
set -uo pipefail
root=$1 bin=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin" train --arch small_cnn --dataset synthetic --synthetic-size 64 -b 16 --max-iters 1 \
  --epochs 1 --workers 0 --threads 1 --test-subset 16 --eval-batches 1 -q --out "$tmp/run" \
  >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; fail "training run"; }
ckpt=$tmp/run/checkpoint.safetensors
same=$(/usr/bin/python3 "$root/scripts/compare_checkpoints.py" "$ckpt" "$ckpt") ||
  fail "a checkpoint differs from itself: $same"
echo "$same"
grep -q "largest relative difference 0.00e+00" <<<"$same" || fail "self-comparison: $same"

# One float of the first float32 tensor moved by 1%: the comparison must fail on it.
/usr/bin/python3 - "$ckpt" "$tmp/moved.safetensors" <<'PY'
import json, struct, sys
blob = bytearray(open(sys.argv[1], "rb").read())
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
name = next(k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32")
at = 8 + n + header[name]["data_offsets"][0]
(v,) = struct.unpack("<f", blob[at:at + 4])
blob[at:at + 4] = struct.pack("<f", v * 1.01 + 1e-3)
open(sys.argv[2], "wb").write(blob)
PY
moved=$(/usr/bin/python3 "$root/scripts/compare_checkpoints.py" --rtol 1e-4 "$ckpt" "$tmp/moved.safetensors") &&
  fail "a moved parameter passed: $moved"
echo "$moved"
grep -q "1 above" <<<"$moved" || fail "the moved tensor was not counted: $moved"

overlap=$(/usr/bin/python3 "$root/scripts/overlap_from_trace.py" \
  "$root/docs/traces/resnet20_2ranks_100mbit.json") || fail "overlap: $overlap"
echo "$overlap"
grep -Eq "^exchange [0-9.]+ ms per step, exposed [0-9.]+ ms, hidden [0-9]+%" <<<"$overlap" ||
  fail "overlap line: $overlap"
echo "gpu_check_tools_test: ok"
