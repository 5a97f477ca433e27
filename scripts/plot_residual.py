#!/usr/bin/python3
"""Draws the error-feedback residual of several sparsetrain runs: the L2 norm of a rank's
residual over all buckets after each exchange (`sp_residual_norm`), and where the hook's
time goes per iteration (`sp_ef_ms`, `sp_select_ms`, `sp_pack_ms`, `sp_comm_ms`,
`sp_decode_ms`, `sp_update_ms`; docs/SPARSIFIERS.md, "Statistics"). Prints one JSON line
per run with second-half means.

  scripts/plot_residual.py topk=runs/t micro=runs/m -o docs/img/residual.png [--smooth 10]
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import read_rows, run_arguments, second_half_mean, smooth  # noqa: E402

PHASES = ["ef", "select", "pack", "comm", "decode", "update"]



def main():
    a = run_arguments(__doc__, "residual.png", 10)

    fig, (res_ax, ph_ax) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    names, phase_means = [], []
    for spec in a.runs:
        name, _, d = spec.rpartition("=") if "=" in spec else (os.path.basename(spec.rstrip("/")), "", spec)
        rows = [r for r in read_rows(d, "iterations") if "sp_residual_norm" in r]
        if not rows:
            sys.exit(f"plot_residual.py: {d}: no sp_residual_norm column (a sparsified run is needed)")
        steps = [r["step"] for r in rows]
        norm = [r["sp_residual_norm"] for r in rows]
        res_ax.plot(steps, smooth(norm, a.smooth), label=name)
        means = {p: second_half_mean([r.get(f"sp_{p}_ms", 0.0) for r in rows]) for p in PHASES}
        names.append(name)
        phase_means.append(means)
        print(json.dumps({"run": name, "dir": d, "iterations": len(rows),
                          "residual_norm_2nd_half": second_half_mean(norm),
                          "residual_norm_last": norm[-1],
                          "exchange_ms_2nd_half": second_half_mean([r["sp_exchange_ms"] for r in rows]),
                          **{f"{p}_ms_2nd_half": v for p, v in means.items()}}))
    res_ax.set(xlabel="iteration", ylabel=f"residual L2 norm, one rank (moving avg {a.smooth})")
    res_ax.grid(alpha=0.3)
    res_ax.legend(fontsize=8)
    # Grouped bars on a log axis: comm (which includes waiting for the other ranks) is
    # orders of magnitude above the CPU phases.
    width = 0.8 / max(len(names), 1)
    for j, (name, means) in enumerate(zip(names, phase_means)):
        xs = [i + (j - (len(names) - 1) / 2) * width for i in range(len(PHASES))]
        ph_ax.bar(xs, [max(means[p], 1e-4) for p in PHASES], width=width, label=name)
    ph_ax.set_xticks(range(len(PHASES)), PHASES)
    ph_ax.set(ylabel="ms per iteration (2nd half, summed over buckets)", yscale="log")
    ph_ax.legend(fontsize=8)
    ph_ax.grid(alpha=0.3, axis="y")
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"plot_residual.py: wrote {a.output} ({len(a.runs)} run(s))", file=sys.stderr)


if __name__ == "__main__":
    main()
