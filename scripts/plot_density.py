#!/usr/bin/python3
"""Draws sparsification statistics of several sparsetrain runs on one figure:
actual density vs iteration against the user-set density (MiCRO/ExDyna hold d, Top-k's
union grows above it), padding overhead of the index allgather (MiCRO vs ExDyna), and
the threshold. Reads the sp_* columns of iterations.csv/.jsonl from `sparsetrain train
--out DIR` and prints one JSON line per run with second-half means (the numbers
docs/RESULTS.md quotes: mean actual density / d and mean padding overhead).

  scripts/plot_density.py micro=runs/m exdyna=runs/e topk=runs/t -o density.png [--smooth 20]
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import read_rows, run_arguments, second_half_mean, smooth  # noqa: E402



def main():
    a = run_arguments(__doc__, "density.png", 20)

    fig, (dens_ax, pad_ax, thr_ax) = plt.subplots(1, 3, figsize=(17, 4.8))
    targets = set()
    for spec in a.runs:
        name, _, d = spec.rpartition("=") if "=" in spec else (os.path.basename(spec.rstrip("/")), "", spec)
        rows = read_rows(d, "iterations")
        if not rows:
            sys.exit(f"plot_density.py: {d}: no iterations.csv/.jsonl found")
        rows = [r for r in rows if "sp_density" in r]
        if not rows:
            sys.exit(f"plot_density.py: {d}: no sp_* columns (was the run made with --sparsifier?)")
        # Dense warm-up iterations report density 1; leave them out.
        rows = [r for r in rows if r["sp_density"] < 1.0] or rows
        steps = [r["step"] for r in rows]
        density = [r["sp_density"] for r in rows]
        # User density d = k / n = sp_density * sp_k / sp_global.
        user = [r["sp_density"] * r["sp_k"] / r["sp_global"] for r in rows if r.get("sp_global", 0) > 0]
        d_user = sum(user) / len(user) if user else float("nan")
        targets.add(round(d_user, 6))
        (line,) = dens_ax.plot(steps, smooth(density, a.smooth), label=name)
        pad = [r.get("sp_padding", 0.0) for r in rows]
        pad_ax.plot(steps, smooth(pad, a.smooth), color=line.get_color(),
                    label=f"{name} (mean {second_half_mean(pad):.3f})")
        thr = [r.get("sp_threshold", 0.0) for r in rows]
        if any(t > 0 for t in thr):
            thr_ax.plot(steps, thr, color=line.get_color(), label=name)
        print(json.dumps({"run": name, "dir": d, "iterations": len(rows), "user_density": d_user,
                          "actual_density_2nd_half": second_half_mean(density),
                          "actual_over_user_2nd_half": second_half_mean(density) / d_user,
                          "padding_2nd_half": second_half_mean(pad)}))
    for t in sorted(targets):
        dens_ax.axhline(t, color="black", linestyle="--", linewidth=1, label=f"d = {t:g}")
    dens_ax.set(xlabel="iteration", ylabel=f"actual density (moving avg {a.smooth})", yscale="log")
    pad_ax.set(xlabel="iteration", ylabel="padding overhead  max k_i * P / sum k_i - 1")
    thr_ax.set(xlabel="iteration", ylabel="threshold (largest bucket)", yscale="log")
    for ax in (dens_ax, pad_ax, thr_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"plot_density.py: wrote {a.output} ({len(a.runs)} run(s))", file=sys.stderr)


if __name__ == "__main__":
    main()
