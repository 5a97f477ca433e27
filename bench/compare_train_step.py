"""Runs bench/train_step_bench (sparsetrain) and bench/torch_train_step.py (PyTorch 1.13) in
one run with the same threads, alternating for --rounds and keeping each side's best median,
then prints the step-time ratio and the peak-memory ratio (sparsetrain / torch; below 1.0
means sparsetrain is faster or smaller; peak memory is each process's ru_maxrss), the
per-round ratios with their median and spread, and each side's achieved GFLOP/s and
fraction of this machine's fp32 FMA peak (bench/peak_bench, run once first; the FLOP
count is torch_train_step.forward_flops, the same for both sides). Both
sides build the same network at its natural input size: CIFAR ResNets at 32x32, ImageNet
ResNets at 224x224 against torchvision's models, GoogLeNet, SENet-18 and SE-ResNet-18 at
32x32 against bench/torch_cifar_models.py; an arch without a PyTorch twin is refused
(bench/torch_train_step.py PEERS).

  /usr/bin/python3 bench/compare_train_step.py --build build [--arch resnet20] [--rounds 3]
  /usr/bin/python3 bench/compare_train_step.py --arch resnet50 --batch 16 --reps 3 --rounds 2
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_train_step import PEERS, add_gflops, build, forward_flops  # noqa: E402


def machine_peak(build_dir, threads):
    """fp32 FMA peak in GFLOP/s on `threads` threads, measured by bench/peak_bench."""
    exe = os.path.join(build_dir, "bench", "peak_bench")
    if not os.path.exists(exe):
        sys.exit(f"{exe} not found; build the peak_bench target")
    out = subprocess.run([exe, "--threads", str(threads), "--mb", "64"], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        d = json.loads(line)
        if d["op"] == "fma_fp32" and d["threads"] == threads:
            print(line, flush=True)
            return d["gflops"]
    sys.exit("peak_bench printed no FMA peak for the thread count")


def round_ratios(rounds):
    """Median and spread (min, max) of the per-round sparsetrain/torch step-time ratios."""
    r = sorted(rounds)
    return {"round_ratios": [round(v, 3) for v in rounds], "median_ratio": round(r[len(r) // 2], 3),
            "min_ratio": round(r[0], 3), "max_ratio": round(r[-1], 3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--arch", default="resnet20")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=0, help="input side (0 = the arch's natural one)")
    a = ap.parse_args()
    if a.arch not in PEERS:
        sys.exit(f"compare_train_step: no PyTorch twin for --arch {a.arch}; comparable: "
                 f"{', '.join(PEERS)}")
    size = a.size or PEERS[a.arch][1]
    common = ["--arch", a.arch, "--batch", str(a.batch), "--size", str(size), "--reps",
              str(a.reps), "--threads", str(a.threads)]
    ours = [os.path.join(a.build, "bench", "train_step_bench")] + common
    theirs = ["/usr/bin/python3", os.path.join(HERE, "torch_train_step.py")] + common
    if not os.path.exists(ours[0]):
        sys.exit(f"compare_train_step: {ours[0]} not found; build first (scripts/test.sh)")
    peak = machine_peak(a.build, a.threads)
    flops = forward_flops(build(a.arch), a.batch, size)
    best, ratios = {}, []
    for r in range(a.rounds):
        this = {}
        for impl, cmd in (("sparsetrain", ours), ("torch", theirs)):
            d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            d = add_gflops(d, flops, peak)
            this[impl] = d["step_ms"]
            if impl not in best or d["step_ms"] < best[impl]["step_ms"]:
                best[impl] = d
            print(json.dumps(d), flush=True)
        ratios.append(this["sparsetrain"] / this["torch"])
        print(f"compare_train_step: round {r + 1}/{a.rounds} done", file=sys.stderr)
    o, t = best["sparsetrain"], best["torch"]
    print(json.dumps({"bench": "train_step_compare", "arch": a.arch, "batch": a.batch, "size": size,
                      "threads": a.threads, "sparsetrain_step_ms": o["step_ms"],
                      "torch_step_ms": t["step_ms"], "time_ratio": round(o["step_ms"] / t["step_ms"], 3),
                      **round_ratios(ratios), "step_gflop": o["step_gflop"], "peak_gflops": peak,
                      "sparsetrain_gflops": o["step_gflops"], "torch_gflops": t["step_gflops"],
                      "sparsetrain_peak_fraction": o["peak_fraction"],
                      "torch_peak_fraction": t["peak_fraction"],
                      "sparsetrain_peak_rss_mb": o["peak_rss_mb"], "torch_peak_rss_mb": t["peak_rss_mb"],
                      "memory_ratio": round(o["peak_rss_mb"] / t["peak_rss_mb"], 3)}))


if __name__ == "__main__":
    main()
