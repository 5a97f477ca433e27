#!/usr/bin/python3
"""Iteration time against the bucket cap (docs/tutorial/09-allreduce.md, "The bucket size,
measured"; called by scripts/tutorial_figures.sh):

  plot_bucket_sweep.py CAP=RUN ... -o PNG [--warmup 4] [--title TEXT]

CAP is the run's --bucket-cap-mb (and --first-bucket-mb); RUN its --out folder, whose
median step time is taken from iterations.csv (differences of wall_s after --warmup
steps); RUN_plan.txt, the run's --print-buckets output, gives its number of buckets.
Prints one JSON line per run (cap_mb, buckets, step_ms) and draws step time against the
caps, evenly spaced from the smallest, each labelled with its bucket count.
Needs matplotlib (Debian's python3-matplotlib).
"""
import argparse
import csv
import json
import os
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def step_ms(run, warmup):
    with open(os.path.join(run, "iterations.csv")) as f:
        walls = [float(r["wall_s"]) for r in csv.DictReader(f)]
    if len(walls) < warmup + 3:
        sys.exit(f"plot_bucket_sweep: {run} has {len(walls)} steps, need {warmup + 3}")
    return statistics.median((walls[i] - walls[i - 1]) * 1e3 for i in range(warmup + 1, len(walls)))


def bucket_count(run):
    with open(run + "_plan.txt") as f:
        return sum(1 for line in f if re.match(r"\s*bucket \d+: \d+ elements", line))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="CAP=RUN")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--title", default="iteration time against the bucket cap")
    a = ap.parse_args()
    points = []
    for arg in a.runs:
        cap, _, run = arg.partition("=")
        p = {"cap_mb": float(cap), "buckets": bucket_count(run), "step_ms": step_ms(run, a.warmup)}
        print(json.dumps({**p, "step_ms": round(p["step_ms"], 2)}))
        points.append(p)
    points.sort(key=lambda p: p["cap_mb"])
    fig, ax = plt.subplots(figsize=(8, 4.2))
    # Evenly spaced caps, smallest left: 1e-9 MB (one bucket per parameter) is no distance
    # on any axis that also shows 25 MB.
    xs = range(len(points))
    ys = [p["step_ms"] for p in points]
    ax.plot(xs, ys, "o-", color="#4c78a8")
    for x, p in zip(xs, points):
        ax.annotate(f"{p['step_ms']:.0f} ms", (x, p["step_ms"]), textcoords="offset points",
                    xytext=(0, 8), ha="center", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{p['cap_mb']:g} MB\n{p['buckets']} bucket{'s' if p['buckets'] != 1 else ''}"
                        for p in points], fontsize=8)
    ax.set_xlabel("--first-bucket-mb = --bucket-cap-mb, and the buckets it gives")
    ax.set_ylabel("median time per step (ms)")
    ax.set_ylim(0, max(p["step_ms"] for p in points) * 1.2)
    ax.grid(color="#dddddd", lw=0.5)
    ax.set_title(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"plot_bucket_sweep: wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
