#!/usr/bin/python3
"""Tutorial step 8's exercise (docs/tutorial/08-scaling.md): the alpha-beta cost of a ring
allreduce and of one iteration's exchange, in scripts/scaling_model.py (`coll`,
`coll_time`, `exchange_time`), against values worked out by hand. Replace those functions'
bodies with your own and rerun `ctest -L tutorial -R tutorial_step8`.
  /usr/bin/python3 tests/tutorial/scaling_exercise_test.py BUILD/apps/sparsetrain"""
import json
import math
import os
import subprocess
import sys

# SCALING_MODEL_DIR: a folder with another scaling_model.py (tests/tutorial/mutants.py).
sys.path.insert(0, os.environ.get("SCALING_MODEL_DIR") or
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import scaling_model as sm  # noqa: E402

listing = json.loads(subprocess.run([sys.argv[1], "sparsifiers", "--json"], check=True,
                                    capture_output=True, text=True).stdout)
sm.load_sparsifiers(listing)
failures = []


def check(name, got, want, rel=1e-9):
    ok = math.isclose(got, want, rel_tol=rel, abs_tol=1e-15)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: got {got!r}, want {want!r}")
    if not ok:
        failures.append(name)


ALPHA = 50e-6          # 50 us per message step
BETA = 8 / 100e6       # 100 Mbit/s: 80 ns per byte
N = 269_434            # ResNet-20's gradients (floats)

# A ring allreduce of n bytes on P workers: 2 (P-1) steps, each moving n / P bytes.
steps, volume = sm.coll("allreduce", 4, 1000)
check("ring steps, P = 4", steps, 6)
check("ring bytes per worker, P = 4", volume, 1500.0)
# P = 2, 1 MB: 2 alpha + 1 MB * beta = 0.1 ms + 80 ms.
check("allreduce 1 MB at 100 Mbit/s, P = 2", sm.coll_time("allreduce", 2, 1e6, ALPHA, BETA),
      2 * ALPHA + 1e6 * BETA)
# The per-worker volume tends to 2 n as P grows: the ring is bandwidth-optimal.
check("ring bytes per worker, P = 256", sm.coll("allreduce", 256, 1000)[1], 2 * 255 / 256 * 1000)

# ResNet-20's dense exchange per iteration on 256 workers: the default plan has 2 buckets
# (1 MB, then the remaining 0.03 MB), each an allreduce paying 2 (P-1) latency steps.
check("ResNet-20 buckets", sm.buckets(N), 2)
bytes_ = 4.0 * N
want = 2 * 2 * 255 * ALPHA + 2 * 255 / 256 * bytes_ * BETA
check("dense ResNet-20 exchange, P = 256", sm.exchange_time("none", 256, N, {}, ALPHA, BETA), want)

# Top-k at d = 0.01 on 256 workers: the union grows to min(n, P k); MiCRO's stays k.
k = 0.01 * N
topk = sm.ideal_stats("topk", 256, N, 0.01)
micro = sm.ideal_stats("micro", 256, N, 0.01)
check("Top-k union at P = 256 (build-up)", topk["union"], min(N, 256 * k))
check("MiCRO union at P = 256", micro["union"], k)
check("MiCRO per-rank count", micro["local"], k / 256)

if failures:
    print(f"{len(failures)} failure(s): {', '.join(failures)}")
    sys.exit(1)
print("all passed")
