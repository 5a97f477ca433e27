"""Mixed precision step time on this CPU: bench/train_step_bench (sparsetrain) with
--precision fp32 and bf16, and bench/torch_train_step.py (PyTorch 1.13) in fp32 and under
CPU autocast bf16, in one run with the same model, batch, input and threads. The four
alternate for --rounds; each keeps its best median. Prints one JSON line per measurement,
then one with the ratios (below 1.0 = the first is faster):
  bf16_over_fp32        sparsetrain bf16 / sparsetrain fp32
  torch_bf16_over_fp32  PyTorch autocast bf16 / PyTorch fp32
  bf16_over_torch_bf16  sparsetrain bf16 / PyTorch autocast bf16
with each run's achieved GFLOP/s and fraction of the fp32 FMA peak (bench/peak_bench; the
count is torch_train_step.forward_flops, as in bench/compare_train_step.py).

  /usr/bin/python3 bench/compare_precision.py --build build [--arch resnet20] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_train_step import machine_peak  # noqa: E402
from torch_train_step import PEERS, add_gflops, build, forward_flops  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--arch", default="resnet20")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.arch not in PEERS:
        sys.exit(f"compare_precision: no PyTorch twin for --arch {a.arch}; comparable: "
                 f"{', '.join(PEERS)}")
    size = PEERS[a.arch][1]
    common = ["--arch", a.arch, "--batch", str(a.batch), "--size", str(size), "--reps",
              str(a.reps), "--threads", str(a.threads)]
    ours = os.path.join(a.build, "bench", "train_step_bench")
    if not os.path.exists(ours):
        sys.exit(f"compare_precision: {ours} not found; build the train_step_bench target")
    torch = ["/usr/bin/python3", os.path.join(HERE, "torch_train_step.py")] + common
    runs = {"fp32": [ours] + common + ["--precision", "fp32"],
            "bf16": [ours] + common + ["--precision", "bf16"],
            "torch_fp32": torch + ["--autocast", "off"],
            "torch_bf16": torch + ["--autocast", "bf16"]}
    peak = machine_peak(a.build, a.threads)
    flops = forward_flops(build(a.arch), a.batch, size)
    best = {}
    for r in range(a.rounds):
        for name, cmd in runs.items():
            d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            d = add_gflops(d, flops, peak)
            if name not in best or d["step_ms"] < best[name]["step_ms"]:
                best[name] = d
            print(json.dumps(d), flush=True)
        print(f"compare_precision: round {r + 1}/{a.rounds} done", file=sys.stderr)
    ms = {name: best[name]["step_ms"] for name in runs}
    print(json.dumps({"bench": "precision_compare", "arch": a.arch, "batch": a.batch,
                      "size": size, "threads": a.threads, "rounds": a.rounds,
                      **{f"{name}_step_ms": v for name, v in ms.items()},
                      **{f"{name}_peak_fraction": best[name]["peak_fraction"] for name in runs},
                      "bf16_over_fp32": round(ms["bf16"] / ms["fp32"], 3),
                      "torch_bf16_over_fp32": round(ms["torch_bf16"] / ms["torch_fp32"], 3),
                      "bf16_over_torch_bf16": round(ms["bf16"] / ms["torch_bf16"], 3),
                      "fp32_over_torch_fp32": round(ms["fp32"] / ms["torch_fp32"], 3)}))


if __name__ == "__main__":
    main()
