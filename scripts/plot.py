#!/usr/bin/python3
"""Draws training curves from sparsetrain run folders (iterations.csv/.jsonl and
epochs.csv/.jsonl, as `sparsetrain train --out DIR` writes them) into one PNG.

  scripts/plot.py runs/a runs/b -o curves.png [--smooth 20] [--title T]

Panels: training loss vs iteration and vs wall time; test accuracy vs iteration and vs wall
time. Several runs share each panel, labelled by folder name (or NAME=DIR).
"""
import argparse
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(run_dir, stem):
    for ext in (".csv", ".jsonl"):
        path = os.path.join(run_dir, stem + ext)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            if ext == ".csv":
                rows = list(csv.DictReader(f))
            else:
                rows = [json.loads(line) for line in f if line.strip()]
        return [{k: float(v) for k, v in r.items() if _is_number(v)} for r in rows]
    return None


def _is_number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def smooth(values, window):
    if window <= 1:
        return values
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run folders, optionally NAME=DIR")
    ap.add_argument("-o", "--output", default="curves.png")
    ap.add_argument("--smooth", type=int, default=20, help="moving-average window for the loss")
    ap.add_argument("--title", default="")
    a = ap.parse_args()

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    (loss_it, loss_wall), (acc_it, acc_wall) = axes
    plotted = 0
    for spec in a.runs:
        name, _, d = spec.rpartition("=") if "=" in spec else (os.path.basename(spec.rstrip("/")), "", spec)
        its = read_rows(d, "iterations")
        eps = read_rows(d, "epochs")
        if its is None and eps is None:
            sys.exit(f"plot.py: {d}: no iterations.csv/.jsonl or epochs.csv/.jsonl found")
        if its:
            steps = [r["step"] for r in its]
            loss = smooth([r["loss"] for r in its], a.smooth)
            loss_it.plot(steps, loss, label=name)
            loss_wall.plot([r["wall_s"] / 60 for r in its], loss, label=name)
        if eps:
            acc_it.plot([r["step"] for r in eps], [r["test_acc"] for r in eps], marker="o", label=name)
            acc_wall.plot([r["wall_s"] / 60 for r in eps], [r["test_acc"] for r in eps], marker="o",
                          label=name)
        plotted += 1
    loss_it.set(xlabel="iteration", ylabel=f"training loss (moving avg {a.smooth})", yscale="log")
    loss_wall.set(xlabel="wall time (min)", ylabel="training loss", yscale="log")
    acc_it.set(xlabel="iteration", ylabel="test accuracy (%)")
    acc_wall.set(xlabel="wall time (min)", ylabel="test accuracy (%)")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"plot.py: wrote {a.output} ({plotted} run(s))")


if __name__ == "__main__":
    main()
