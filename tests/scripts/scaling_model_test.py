#!/usr/bin/python3
"""Known-value tests of scripts/scaling_model.py: the alpha-beta formulas against figures
worked out by hand, and the link fit recovering a known alpha and beta. The methods'
exchange patterns come from the binary's `sparsifiers --json` when its path is given (as
ctest does), else from the few entries written out below.
  /usr/bin/python3 tests/scripts/scaling_model_test.py [build/apps/sparsetrain]
  (exit 1 on any failure)"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import scaling_model as sm  # noqa: E402

failures = []

if len(sys.argv) > 1:
    listing = json.loads(subprocess.run([sys.argv[1], "sparsifiers", "--json"], check=True,
                                        capture_output=True, text=True).stdout)
else:
    listing = {"sparsifiers": [
        {"name": "topk", "pattern": "union-allreduce", "partitioned": False},
        {"name": "micro", "pattern": "union-allreduce", "partitioned": True},
        {"name": "gaussiank", "pattern": "allgather-sum", "partitioned": False},
        {"name": "qsgd", "pattern": "allgather-sum", "partitioned": False}]}
sm.load_sparsifiers(listing)


def close(name, got, want, rel=1e-9):
    ok = all(math.isclose(g, w, rel_tol=rel, abs_tol=1e-15) for g, w in zip(got, want)) \
        if isinstance(want, tuple) else math.isclose(got, want, rel_tol=rel, abs_tol=1e-15)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: got {got}, want {want}")
    if not ok:
        failures.append(name)


# Ring allreduce, P = 4, n = 1000 bytes: 2 (P-1) = 6 steps, 2 (P-1)/P n = 1500 bytes per
# rank; on the shared emulated link all 4 ranks' bytes cross it: 6000.
close("allreduce switched", sm.coll("allreduce", 4, 1000), (6, 1500.0))
close("allreduce shared", sm.coll("allreduce", 4, 1000, topology="shared"), (6, 6000.0))
# alpha = 100 us, beta = 10 ns/byte (100 MB/s), 1 MB: 6e-4 + 1.5e6 * 1e-8 = 0.0156 s.
close("allreduce time", sm.coll_time("allreduce", 4, 1e6, 1e-4, 1e-8), 0.0156)
# Allgatherv, P = 8, 8000 bytes in all: 7 steps, 7/8 * 8000 = 7000 bytes.
close("allgatherv", sm.coll("allgatherv", 8, 8000), (7, 7000.0))
# Padded allgather, P = 4, max contribution 100 bytes: counts (3 steps, 3 * 8 bytes) then
# 3 steps of 100 bytes each: 6 steps, 324 bytes.
close("padded", sm.coll("padded", 4, None, 100), (6, 324.0))
# One process: nothing to exchange.
close("P = 1", sm.coll("allreduce", 1, 1000), (0.0, 0.0))
# Binomial broadcast, P = 8: 3 levels, 3 * n per-link bytes; shared: 7 copies of n.
close("bcast", sm.coll("bcast", 8, 40), (3, 120))
close("bcast shared", sm.coll("bcast", 8, 40, topology="shared"), (3, 280))
# Buckets of the default plan: the LSTM's 4,653,200 floats (17.75 MiB) -> 1 MiB + 1 more;
# ResNet-50's 25,557,032 floats (97.5 MiB) -> 1 + ceil(96.5 / 25) = 5.
close("lstm params", sm.PARAMS["lstm"], 4_653_200)
close("lstm buckets", sm.buckets(sm.PARAMS["lstm"]), 2)
close("resnet50 buckets", sm.buckets(sm.PARAMS["resnet50"]), 5)
# Dense exchange of 1000 floats on 2 workers, one bucket: 2 alpha + 2 * 1/2 * 4000 beta.
close("dense exchange", sm.exchange_time("none", 2, 1000, {}, 1e-4, 1e-8), 2e-4 + 4000 * 1e-8)
# MiCRO on 4 workers, one bucket, union 100, max k 30: padded (6 alpha + (24 + 3 * 120) beta)
# + allreduce of 400 bytes (6 alpha + 600 beta) = 12 alpha + 984 beta.
close("union exchange",
      sm.exchange_time("micro", 4, 1000, {"maxk": 30, "union": 100, "k": 10, "local": 25, "wire": 0},
                       1e-4, 1e-8), 12e-4 + 984e-8)
# Gaussian-k (allgather-sum), 4 workers, one bucket, 88 wire bytes per rank: counts
# allgather (3 alpha + 3/4 * 32 beta) + allgatherv of 352 bytes (3 alpha + 264 beta)
# + one more allgatherv's latency (3 alpha) = 9 alpha + 288 beta.
close("allgather exchange",
      sm.exchange_time("gaussiank", 4, 1000, {"wire": 88, "k": 10, "local": 10, "union": 40, "maxk": 10},
                       1e-4, 1e-8), 9e-4 + 288e-8)
# MiCRO's projection: union held at d n, split over P with the measured padding
# (maxk * P_meas / union = 40 * 4 / 100 = 1.6): at P = 16, union 100, maxk 1.6 * 100 / 16.
s = sm.project_stats("micro", {"k": 100, "local": 25, "union": 100, "maxk": 40, "wire": 0}, 4, 16, 10000, 0.01)
close("micro projection", (s["union"], s["maxk"]), (100.0, 10.0))
# Top-k: union/(P local) = 375/(4 * 100) held: at P = 8, 0.9375 * 8 * 100 = 750.
s = sm.project_stats("topk", {"k": 100, "local": 100, "union": 375, "maxk": 100, "wire": 0}, 4, 8, 10000, 0.01)
close("topk projection", s["union"], 750.0)
# Decode: an allgather method sums one payload per rank (measured 40 ms at P = 4 -> 160 ms
# at P = 16); a union method scatters one aggregated vector (held at 5 ms).
close("allgather decode", sm.decode_at("qsgd", 0.040, 4, 16), 0.160)
close("union decode", sm.decode_at("micro", 0.005, 4, 16), 0.005)
# A measured run's prediction adds its decode median to compute (1+2+3+4 ms), selection
# (5 ms) and the modelled exchange on the shared link.
row = {"ranks": 4, "sparsifier": "gaussiank", "data_ms": 1.0, "fwd_ms": 2.0, "bwd_ms": 3.0,
       "opt_ms": 4.0, "sp_select_ms": 5.0, "sp_decode_ms": 6.0, "sp_k": 10, "sp_local": 10,
       "sp_global": 40, "sp_bytes": 88}
fit = {"alpha_s": 1e-4, "beta_s_per_byte": 1e-8}
got = sm.predict_measured(row, fit, 1000)
comm = sm.exchange_time("gaussiank", 4, 1000, sm.stats_from_row(row, 1000), 1e-4, 1e-8, "shared")
close("measured prediction", got, (0.010 + 0.005 + 0.006 + comm, 0.010, 0.005, 0.006, comm))
row.pop("sp_decode_ms")  # runs from before the column: decode counts as 0
close("measured prediction, no decode column", sm.predict_measured(row, fit, 1000)[0],
      0.010 + 0.005 + comm)
# A projection starts from the run with the fewest ranks, then the actual density nearest
# the target: MiCRO's fasttau run (d' 0.0102) over its paper-constant run (d' 0.0009).
slow = {"ranks": 4, "sparsifier": "micro", "density": 0.01, "sp_density": 0.0009}
fast = {"ranks": 4, "sparsifier": "micro", "density": 0.01, "sp_density": 0.0102}
close("base run prefers d' near d", float(sm.base_rank(fast) < sm.base_rank(slow)), 1.0)
close("base run prefers fewer ranks", float(sm.base_rank(dict(slow, ranks=2)) < sm.base_rank(fast)), 1.0)
# Projection compute: the median over the model's runs with the fewest ranks (2-rank runs
# 200, 300, 260 ms -> 260; the 4-rank run is ignored).
rows = [{"model": "lstm", "ranks": 2, "fwd_ms": 100.0, "bwd_ms": 100.0},
        {"model": "lstm", "ranks": 2, "fwd_ms": 100.0, "bwd_ms": 200.0},
        {"model": "lstm", "ranks": 2, "fwd_ms": 60.0, "bwd_ms": 200.0},
        {"model": "lstm", "ranks": 4, "fwd_ms": 900.0, "bwd_ms": 900.0}]
close("common compute", sm.common_compute(rows)["lstm"], (260.0, 3, 2))

# The fit recovers alpha and beta from noise-free records of the shared-link model.
alpha, beta = 80e-6, 8 / 100e6
recs = []
for P in (2, 4):
    for b in (1024, 16384, 262144, 4194304):
        for op in ("allreduce", "allgatherv", "padded"):
            r = {"op": op, "ranks": P, "bytes": b, "result_bytes": b if op == "allreduce" else P * b}
            steps, vol = sm.bench_coeffs(r)
            r["median_ms"] = 1e3 * (steps * alpha + vol * beta)
            recs.append(r)
f = sm.fit_link(recs)
close("fit alpha", f["alpha_s"], alpha, rel=1e-6)
close("fit beta", f["beta_s_per_byte"], beta, rel=1e-6)
close("fit rate", f["rate_mbit"], 100.0, rel=1e-6)

# One point 50x too slow (a lost scheduler slice) is dropped, not fitted.
recs[9]["median_ms"] *= 50  # P = 2, 4 MB allreduce
f = sm.fit_link(recs)
close("fit alpha, one outlier", f["alpha_s"], alpha, rel=1e-6)
close("fit beta, one outlier", f["beta_s_per_byte"], beta, rel=1e-6)
close("outlier dropped", f["dropped"], 1)

# Every listed method has a cost formula; a method the listing lacks is an error naming it.
for m in listing["sparsifiers"]:
    t = sm.exchange_time(m["name"], 8, 10000, sm.ideal_stats(m["name"], 8, 10000, 0.01), 1e-4, 1e-8)
    close(f"{m['name']} ({m['pattern']}) priced", float(t > 0 and math.isfinite(t)), 1.0)
try:
    sm.exchange_time("nosuch", 4, 1000, {}, 1e-4, 1e-8)
    close("unknown method is an error", 0.0, 1.0)
except ValueError as e:
    close("unknown method is an error naming it", float("'nosuch'" in str(e)), 1.0)

# Two levels: one rank per node is the flat exchange over the nodes; one node is the flat
# exchange inside it; on 2 nodes of 4, dense pays the reduce-scatter and allgather inside
# (3 alpha + 3/4 4n beta each) and a ring allreduce of 4n/4 bytes across (2 alpha +
# 2 (1/2) 4(n/4) beta), its beta times 4 for the 4 groups sharing the node's link.
inter, intra = (1e-5, 8e-8), (5e-6, 2e-11)
n = 1_000_000
close("two-level, one rank per node = flat", sm.two_level_exchange_time("topk", 4, 1, n, 0.01, inter, intra),
      sm.flat_exchange_time("topk", 4, n, 0.01, inter), rel=1e-12)
close("two-level, one node = flat inside it", sm.two_level_exchange_time("micro", 1, 4, n, 0.01, inter, intra),
      sm.flat_exchange_time("micro", 4, n, 0.01, intra), rel=1e-12)
close("two-level dense, 2 nodes: inside + slices across",
      sm.two_level_exchange_time("none", 2, 4, n, 0.01, inter, intra),
      2 * (3 * 5e-6 + 3 / 4 * 4 * n * 2e-11) + 2 * 1e-5 + 2 * 1 / 2 * 4 * (n / 4) * 8e-8 * 4, rel=1e-12)
rows = sm.project_two_level(["topk"], ["lstm"], 8, [4], 0.01, {"x": inter}, intra)
close("topk two-level below flat at 4x8", float(rows[0]["two_level_ms"] < rows[0]["flat_ms"]), 1.0)

# The communication check: a dense small_cnn run on 8 ranks over a shared link, measured
# at exactly the model's figure, shows 0% error; one measured at twice it, -50%. A ring
# allreduce of 4 n bytes on 8 ranks: 14 alpha + 2 (7/8) 4n 8 beta on the shared link.
alpha, beta = 1e-4, 1e-8
n = sm.PARAMS["small_cnn"]
want_ms = 1e3 * (14 * alpha + 2 * 7 / 8 * 4 * n * 8 * beta)
fits = {"1gbit": {"alpha_s": alpha, "beta_s_per_byte": beta}}
row = {"id": "a", "model": "small_cnn", "ranks": 8, "bandwidth": "1gbit", "sparsifier": "none",
       "comm_ms": want_ms}
lines, out = sm.comm_check([row, dict(row, id="b", comm_ms=2 * want_ms)], fits)
close("comm check: modelled dense allreduce", out[0]["model_ms"], want_ms, rel=1e-12)
close("comm check: error 0 at the model's figure", out[0]["error"], 0.0)
close("comm check: error -50% at twice it", out[1]["error"], -0.5, rel=1e-12)
# A sparsified run's measured communication is its exchange less its decoding.
sp = dict(row, sparsifier="topk", density=0.01, sp_exchange_ms=3.0, sp_decode_ms=1.0)
close("comm check: exchange less decode", sm.measured_comm_ms(sp), 2.0)

print(f"{len(failures)} failure(s)" + (": " + ", ".join(failures) if failures else ""))
sys.exit(1 if failures else 0)
