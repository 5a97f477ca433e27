"""Runs bench/select_bench (sparsetrain) and bench/torch_topk.py (PyTorch) in one run with
the same thread count and prints, per density, the two target ratios:
  topk / torch.topk(x.abs(), k)       target <= 0.5
  threshold / one streaming pass      target <= 1.2
as JSON lines, then a Markdown table. Rounds alternate the two programs and every op keeps
its best median, so a background hiccup during one program's turn does not decide a ratio.
The threshold/stream ratio is the median over rounds of select_bench's paired ratio (the
two run alternately rep by rep), printed with every round's value (the spread).

  /usr/bin/python3 bench/compare_select.py --build build [--reps 11] [--threads 2] [--rounds 3]
"""
import argparse
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=25557032)
    args = ap.parse_args()
    env_args = ["--n", str(args.n), "--reps", str(args.reps), "--threads", str(args.threads)]
    ours_cmd = [os.path.join(args.build, "bench", "select_bench")] + env_args
    torch_cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_topk.py")] + env_args
    best, paired = {}, {}
    for _ in range(args.rounds):
        for cmd in (ours_cmd, torch_cmd):
            for r in run(cmd):
                key = (r["impl"], r["density"], r["op"])
                if "vs_stream" in r:
                    paired.setdefault(r["density"], []).append(r["vs_stream"])
                if key not in best or r["median_ms"] < best[key]["median_ms"]:
                    best[key] = r
    rows = []
    for d in sorted({k[1] for k in best}, reverse=True):
        ms = {(impl, op): best[(impl, dd, op)]["median_ms"] for (impl, dd, op) in best if dd == d}
        row = {
            "density": d, "k": best[("sparsetrain", d, "topk")]["k"], "n": args.n,
            "threads": args.threads,
            "topk_ms": ms[("sparsetrain", "topk")],
            "torch_topk_ms": ms[("torch", "topk")],
            "torch_topk_only_ms": ms[("torch", "topk_only")],
            "threshold_ms": ms[("sparsetrain", "threshold")],
            "stream_ms": ms[("sparsetrain", "stream")],
        }
        row["topk_vs_torch"] = round(row["topk_ms"] / row["torch_topk_ms"], 3)
        rounds = sorted(paired[d])
        row["threshold_vs_stream_rounds"] = paired[d]
        row["threshold_vs_stream"] = rounds[len(rounds) // 2]
        row["pass"] = row["topk_vs_torch"] <= 0.5 and row["threshold_vs_stream"] <= 1.2
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| d | k | our Top-k ms | torch.topk(x.abs()) ms | ratio (<= 0.5) "
          "| threshold ms | stream pass ms | paired ratio, median (<= 1.2) | rounds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['density']} | {r['k']} | {r['topk_ms']:.1f} | {r['torch_topk_ms']:.1f} "
              f"| {r['topk_vs_torch']:.3f} | {r['threshold_ms']:.1f} | {r['stream_ms']:.1f} "
              f"| {r['threshold_vs_stream']:.3f} "
              f"| {', '.join(f'{v:.2f}' for v in r['threshold_vs_stream_rounds'])} |")


if __name__ == "__main__":
    main()
