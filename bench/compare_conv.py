"""Runs bench/conv_bench (sparsetrain) and bench/torch_conv.py (PyTorch 1.13) in one run,
both with the same thread count, and prints one JSON line per shape with the time ratio
(sparsetrain / torch; below 1.0 means sparsetrain is faster), then a total weighted by how
often each shape occurs in ResNet-20.

  /usr/bin/python3 bench/compare_conv.py --build build [--reps 20] [--threads 2] [--rounds 3]

Rounds alternate the two programs, and each shape keeps its best median, so a background
hiccup during one program's turn does not decide the ratio.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {d["shape"]: d for d in map(json.loads, out.splitlines())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    ours_cmd = [os.path.join(a.build, "bench", "conv_bench"), "--reps", str(a.reps), "--threads",
                str(a.threads)]
    torch_cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_conv.py"), "--reps", str(a.reps),
                 "--threads", str(a.threads)]
    if not os.path.exists(ours_cmd[0]):
        sys.exit(f"compare_conv: {ours_cmd[0]} not found; build first (scripts/test.sh)")
    best = {"sparsetrain": {}, "torch": {}}
    for r in range(a.rounds):
        for impl, cmd in (("sparsetrain", ours_cmd), ("torch", torch_cmd)):
            for shape, d in run(cmd).items():
                if shape not in best[impl] or d["total_ms"] < best[impl][shape]["total_ms"]:
                    best[impl][shape] = d
        print(f"compare_conv: round {r + 1}/{a.rounds} done", file=sys.stderr)
    tot_o = tot_t = 0.0
    for shape, o in best["sparsetrain"].items():
        t = best["torch"][shape]
        tot_o += o["total_ms"] * o["count"]
        tot_t += t["total_ms"] * t["count"]
        print(json.dumps({"bench": "conv_compare", "shape": shape, "count": o["count"],
                          "sparsetrain_fwd_ms": o["fwd_ms"], "sparsetrain_bwd_ms": o["bwd_ms"],
                          "torch_fwd_ms": t["fwd_ms"], "torch_bwd_ms": t["bwd_ms"],
                          "ratio": round(o["total_ms"] / t["total_ms"], 3)}))
    print(json.dumps({"bench": "conv_compare", "shape": "resnet20_total", "threads": a.threads,
                      "sparsetrain_ms": round(tot_o, 2), "torch_ms": round(tot_t, 2),
                      "ratio": round(tot_o / tot_t, 3)}))


if __name__ == "__main__":
    main()
