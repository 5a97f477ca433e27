#!/usr/bin/python3
"""Draws the scale figures and tables from finished sparsetrain runs at several rank
counts (the grids scripts/experiments/scale*.conf): against P, the actual density over d
(second-half mean and spread), the padding overhead of the padded index allgather, each
rank's achieved over target density (the threshold rules), the bytes a rank sends per step
and the test accuracy after the same number of steps; against the iteration, at chosen P,
the actual density and the threshold of every method.

  scripts/plot_scale.py runs/scale_quick runs/scale -o docs/img/scale [--traj-ranks 16,64]

Each argument is a run folder or a folder searched for them (a run folder holds
config.json, iterations.csv and the runner's run.json). Writes into the output folder
scale_<model>_d<d>.png (five panels vs P), traj_<model>_d<d>_np<P>.png, scale.md (the
tables) and scale.json (one line per run). A configuration found twice is taken from
the first folder given. --flat instead prints one row per run folder (an ablation's
variants) and writes it to flat.md.
"""
import argparse
import json
import math
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import read_rows  # noqa: E402

# Methods whose exchange has a padded index allgather (union-allreduce pattern).
UNION = ("topk", "micro", "exdyna", "hard_threshold", "sage")
# Methods that choose by a threshold rule meant to hit d on each rank.
THRESHOLD = ("sidco-e", "sidco-p", "sidco-gp", "hard_threshold", "sage", "dgc")
ORDER = ("none", "dense", "topk", "gtopk", "micro", "exdyna", "sidco-e", "sidco-p", "sidco-gp",
         "hard_threshold", "sage", "dgc")


def die(msg):
    sys.exit(f"plot_scale.py: {msg}")


def find_runs(paths):
    """Run folders under each path (a folder with config.json and iterations.*)."""
    found = []
    for top in paths:
        if not os.path.isdir(top):
            die(f"{top}: no such folder")
        for here, dirs, files in sorted(os.walk(top)):
            dirs.sort()
            has_rows = "iterations.csv" in files or "iterations.jsonl" in files
            # A runner folder without run.json is a run still going or one that failed.
            unfinished = "log.txt" in files and "run.json" not in files
            if "config.json" in files and has_rows and not unfinished:
                found.append(here)
    if not found:
        die(f"no run folders (config.json + iterations.csv) under {', '.join(paths)}")
    return found


def mean_std(values):
    values = [v for v in values if v == v]
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.pstdev(values) if len(values) > 1 else 0.0)


def summarize(folder):
    """One dict per run: its configuration and second-half statistics."""
    try:
        cfg = json.load(open(os.path.join(folder, "config.json")))
    except (OSError, ValueError) as e:
        die(f"{folder}/config.json: cannot read it ({e})")
    rows = read_rows(folder, "iterations") or []
    if not rows:
        return None
    sp = cfg.get("sparsifier", "none")
    d = float(cfg.get("density", "nan")) if sp not in ("none",) else float("nan")
    sparse = [r for r in rows if 0 < r.get("sp_density", 1.0) < 1.0]
    tail = sparse[len(sparse) // 2:]
    run = {"dir": os.path.relpath(folder), "model": cfg.get("arch", "?"), "sparsifier": sp, "density": d,
           "ranks": int(cfg.get("world_size", 1)), "iterations": len(rows),
           "batch": int(cfg.get("batch_size", 0))}
    run["ratio"], run["ratio_std"] = mean_std([r["sp_density"] / d for r in tail])
    run["local_ratio"], _ = mean_std([r["sp_local"] / r["sp_k"] for r in tail if r.get("sp_k", 0) > 0])
    run["padding"], run["padding_std"] = mean_std([r.get("sp_padding", float("nan")) for r in tail])
    run["bytes"], _ = mean_std([r.get("sp_bytes", float("nan")) for r in tail])
    run["n"] = next((r["sp_global"] / r["sp_density"] for r in rows
                     if r.get("sp_density", 0) > 0 and r.get("sp_global", 0) > 0), float("nan"))
    run["test_acc"] = final_accuracy(folder)
    run["train_loss"], _ = mean_std([r.get("loss", float("nan")) for r in rows[len(rows) // 2:]])
    run["traj"] = [(r["step"], r.get("sp_density", float("nan")), r.get("sp_threshold", float("nan")))
                   for r in sparse]
    try:
        run["wall_s"] = json.load(open(os.path.join(folder, "run.json")))["wall_s"]
    except (OSError, ValueError, KeyError):
        run["wall_s"] = float("nan")
    return run


def final_accuracy(folder):
    """Test accuracy at the end: epochs.csv's last row, else the closing JSON line that a
    --max-iters run prints (the runner keeps it in log.txt)."""
    epochs = read_rows(folder, "epochs") or []
    if epochs and "test_acc" in epochs[-1]:
        return epochs[-1]["test_acc"]
    try:
        lines = open(os.path.join(folder, "log.txt")).read().splitlines()
    except OSError:
        return float("nan")
    for line in reversed(lines):
        if line.startswith("{") and '"test_acc"' in line:
            try:
                return float(json.loads(line)["test_acc"])
            except (ValueError, KeyError):
                break
    return float("nan")


def collect(paths, every=False):
    """Runs by configuration; every=True keeps each folder (variants of one configuration)."""
    runs = {}
    for folder in find_runs(paths):
        r = summarize(folder)
        if r is not None:
            key = folder if every else (r["model"], r["sparsifier"], r["density"], r["ranks"])
            runs.setdefault(key, r)
    # Dense runs send 4n bytes (the allreduce contribution), n from a sparse run of the model.
    n_of = {r["model"]: r["n"] for r in runs.values() if r["n"] == r["n"]}
    for r in runs.values():
        if r["sparsifier"] == "none":
            r["bytes"] = 4 * n_of.get(r["model"], float("nan"))
    return list(runs.values())


def method_key(name):
    return (ORDER.index(name) if name in ORDER else len(ORDER), name)


def groups(runs):
    """(model, d) -> runs at that density plus the model's dense runs."""
    out = {}
    for r in runs:
        if r["sparsifier"] != "none":
            out.setdefault((r["model"], r["density"]), []).append(r)
    for (model, _), rs in out.items():
        rs += [r for r in runs if r["sparsifier"] == "none" and r["model"] == model]
    return out


def by_method(rs):
    m = {}
    for r in sorted(rs, key=lambda r: r["ranks"]):
        m.setdefault(r["sparsifier"], []).append(r)
    return {k: m[k] for k in sorted(m, key=method_key)}


PANELS = (("ratio", "actual density / d (2nd half)", lambda s: s != "none", True),
          ("padding", "padding overhead (2nd half)", lambda s: s in UNION, False),
          ("local_ratio", "rank's achieved / target density", lambda s: s in THRESHOLD, True),
          ("bytes", "bytes sent per rank per step", lambda s: True, True),
          ("test_acc", "test accuracy after equal steps (%)", lambda s: True, False))


def color(sp):
    """The same colour for a method in every panel and figure."""
    i = method_key(sp)[0] % 20
    return plt.get_cmap("tab20")((2 * i) % 20 + (2 * i) // 20)  # dark shades first


def plot_vs_ranks(model, d, rs, path):
    fig, grid = plt.subplots(2, 3, figsize=(16, 9))
    axes = list(grid.flat)
    for ax, (key, label, wanted, logy) in zip(axes, PANELS):
        for sp, series in by_method(rs).items():
            if not wanted(sp):
                continue
            xs = [r["ranks"] for r in series]
            ys = [r[key] for r in series]
            err = [r[key + "_std"] for r in series] if key + "_std" in series[0] else None
            ax.errorbar(xs, ys, yerr=err, marker="o", ms=3, capsize=2, color=color(sp),
                        label="dense" if sp == "none" else sp)
        if key == "ratio":
            ax.axhline(1.0, color="black", ls="--", lw=1)
            ax.axhline(1.25, color="grey", ls=":", lw=1)
        ax.set(xscale="log", xlabel="ranks P", ylabel=label)
        if logy:
            ax.set_yscale("log")
        ax.set_xticks([1, 2, 4, 8, 16, 32, 64], ["1", "2", "4", "8", "16", "32", "64"])
        ax.grid(alpha=0.3)
    # The last panel holds one legend for all (every method appears in the bytes panel).
    handles, labels = axes[3].get_legend_handles_labels()
    axes[-1].axis("off")
    axes[-1].legend(handles, labels, loc="center", fontsize=10, title="method")
    fig.suptitle(f"{model}, d = {d:g}, fixed global batch (error bars: second-half std)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_trajectories(model, d, rs, p, path):
    series = [r for r in rs if r["ranks"] == p and r["sparsifier"] != "none" and r["traj"]]
    if not series:
        return False
    fig, (dax, tax) = plt.subplots(1, 2, figsize=(13, 4.6))
    for r in sorted(series, key=lambda r: method_key(r["sparsifier"])):
        steps, dens, thr = zip(*r["traj"])
        dax.plot(steps, [x / d for x in dens], lw=1, color=color(r["sparsifier"]), label=r["sparsifier"])
        if any(t > 0 for t in thr):
            tax.plot(steps, thr, lw=1, color=color(r["sparsifier"]), label=r["sparsifier"])
    dax.axhline(1.0, color="black", ls="--", lw=1)
    dax.set(xlabel="iteration", ylabel="actual density / d", yscale="log")
    tax.set(xlabel="iteration", ylabel="threshold (largest bucket)", yscale="log")
    for ax in (dax, tax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{model}, d = {d:g}, P = {p}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def fmt(v, spec):
    return "-" if v is None or v != v else format(v, spec)


def pivot(title, rs, cell, wanted):
    """A method x P table of cell(run) strings."""
    ranks = sorted({r["ranks"] for r in rs})
    lines = [f"**{title}**", "", "| method | " + " | ".join(f"P={p}" for p in ranks) + " |",
             "|---|" + "---|" * len(ranks)]
    for sp, series in by_method(rs).items():
        if not wanted(sp):
            continue
        at = {r["ranks"]: r for r in series}
        vals = [cell(at[p]) if p in at else "-" for p in ranks]
        lines.append(f"| {'dense' if sp == 'none' else sp} | " + " | ".join(vals) + " |")
    return lines + [""]


def tables(grouped):
    lines = []
    for (model, d), rs in sorted(grouped.items()):
        lines += [f"### {model}, d = {d:g}", ""]
        lines += pivot("actual density / d, second-half mean +- std", rs,
                       lambda r: f"{fmt(r['ratio'], '.2f')} +- {fmt(r['ratio_std'], '.2f')}",
                       lambda s: s != "none")
        lines += pivot("padding overhead of the index allgather, second-half mean", rs,
                       lambda r: fmt(r["padding"], ".2f"), lambda s: s in UNION)
        lines += pivot("rank 0's achieved / target density, second-half mean", rs,
                       lambda r: fmt(r["local_ratio"], ".2f"), lambda s: s in THRESHOLD)
        lines += pivot("bytes sent per rank per step, second-half mean", rs,
                       lambda r: fmt(r["bytes"], ".0f"), lambda s: True)
        lines += pivot("test accuracy (%) after the run's steps", rs,
                       lambda r: f"{fmt(r['test_acc'], '.1f')} ({r['iterations']} it)", lambda s: True)
        lines += pivot("wall time of the run (s, mpirun start-up included)", rs,
                       lambda r: fmt(r["wall_s"], ".0f"), lambda s: True)
    return "\n".join(lines)


def flat_table(runs):
    """One row per run folder (an ablation: variants that share model, method, d and P)."""
    lines = ["| run | method | d | P | steps | actual d / d (whole run) | actual d / d (2nd half) "
             "| padding (2nd half) | train loss (2nd half) | test acc % |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        whole = mean_std([x[1] / r["density"] for x in r["traj"]])[0] if r["traj"] else float("nan")
        lines.append(f"| {os.path.basename(r['dir'])} | {'dense' if r['sparsifier'] == 'none' else r['sparsifier']} "
                     f"| {fmt(r['density'], 'g')} | {r['ranks']} | {r['iterations']} | {fmt(whole, '.2f')} "
                     f"| {fmt(r['ratio'], '.2f')} | {fmt(r['padding'], '.2f')} | {fmt(r['train_loss'], '.3f')} "
                     f"| {fmt(r['test_acc'], '.2f')} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", help="run folders or folders holding them")
    ap.add_argument("-o", "--out", required=True, help="output folder for PNGs, scale.md, scale.json")
    ap.add_argument("--traj-ranks", default="16,64", help="P values for the trajectory figures")
    ap.add_argument("--flat", action="store_true", help="only one table row per run folder "
                    "(ablations), printed and written to OUT/flat.md; no figures")
    a = ap.parse_args()
    if a.flat:
        text = flat_table(collect(a.folders, every=True))
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "flat.md"), "w") as f:
            f.write(text + "\n")
        print(text)
        return
    try:
        traj_ranks = [int(x) for x in a.traj_ranks.split(",") if x]
    except ValueError:
        die(f"--traj-ranks {a.traj_ranks}: expected comma-separated integers")
    runs = collect(a.folders)
    grouped = groups(runs)
    if not grouped:
        die("no sparsified runs found (only dense ones)")
    os.makedirs(a.out, exist_ok=True)
    made = []
    for (model, d), rs in sorted(grouped.items()):
        path = os.path.join(a.out, f"scale_{model}_d{d:g}.png")
        plot_vs_ranks(model, d, rs, path)
        made.append(path)
        for p in traj_ranks:
            path = os.path.join(a.out, f"traj_{model}_d{d:g}_np{p}.png")
            if plot_trajectories(model, d, rs, p, path):
                made.append(path)
    with open(os.path.join(a.out, "scale.md"), "w") as f:
        f.write(tables(grouped) + "\n")
    with open(os.path.join(a.out, "scale.json"), "w") as f:
        for r in sorted(runs, key=lambda r: (r["model"], r["density"] if r["density"] == r["density"] else 0,
                                             method_key(r["sparsifier"]), r["ranks"])):
            f.write(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                                for k, v in r.items() if k != "traj"}) + "\n")
    print(f"plot_scale.py: {len(runs)} runs; wrote {len(made)} figures, "
          f"{os.path.join(a.out, 'scale.md')} and scale.json")


if __name__ == "__main__":
    main()
