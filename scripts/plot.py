#!/usr/bin/python3
"""Draws training curves from sparsetrain run folders (iterations.csv/.jsonl and
epochs.csv/.jsonl, as `sparsetrain train --out DIR` writes them) into one PNG.

  scripts/plot.py runs/a runs/b -o curves.png [--smooth 20] [--title T]
  scripts/plot.py --kind times runs/a runs/b -o times.png
  scripts/plot.py --kind padding micro=runs/m exdyna=runs/e -o padding.png
  scripts/plot.py --kind speedup runs/reproduce/summary.json -o speedup.png

Kinds:
  curves  (default) training loss vs iteration and vs wall time; test accuracy (or, for the
          language model, validation perplexity) vs iteration and vs wall time.
  times   per iteration: selection time, exchange time (both summed over buckets) and the
          exposed communication time (the reducer's wait after backward).
  padding padding overhead of the padded index allgather (max_i k_i P / sum_i k_i - 1) per
          iteration, e.g. MiCRO vs ExDyna.
  speedup dense-allreduce iteration time over each sparsifier's vs link bandwidth, from the
          summary.json of scripts/reproduce.sh (one line per sparsifier, model and P).
Several runs share each panel, labelled by folder name (or NAME=DIR). Density vs iteration
is scripts/plot_density.py.
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
        # A damaged file gives one line naming it, not a traceback.
        try:
            with open(path) as f:
                if ext == ".csv":
                    rows = list(csv.DictReader(f))
                else:
                    rows = [json.loads(line) for line in f if line.strip()]
            return [{k: float(v) for k, v in r.items() if _is_number(v)} for r in rows]
        except (OSError, ValueError, csv.Error, AttributeError) as e:
            sys.exit(f"plot.py: {path}: cannot read it ({type(e).__name__}: {' '.join(str(e).split())})")
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


def second_half_mean(values):
    """The mean over the second half of a run: past the warm-up and the early transient."""
    tail = values[len(values) // 2:]
    return sum(tail) / len(tail) if tail else float("nan")


def run_arguments(description, output, smooth):
    """The arguments every per-run figure takes: run folders, output file, smoothing, title."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run folders, optionally NAME=DIR")
    ap.add_argument("-o", "--output", default=output)
    ap.add_argument("--smooth", type=int, default=smooth, help="moving-average window")
    ap.add_argument("--title", default="")
    return ap.parse_args()


def split_spec(spec):
    return spec.rpartition("=")[::2] if "=" in spec else (os.path.basename(spec.rstrip("/")), spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run folders, optionally NAME=DIR (speedup: summary.json)")
    ap.add_argument("-o", "--output", default=None)
    ap.add_argument("--kind", default="curves", choices=["curves", "times", "padding", "speedup"])
    ap.add_argument("--smooth", type=int, default=20, help="moving-average window for the loss")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    a.output = a.output or f"{a.kind}.png"
    try:
        plot(a)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        what = f"a row lacks the column {e}" if isinstance(e, KeyError) else \
            f"{type(e).__name__}: {' '.join(str(e).split())}"
        sys.exit(f"plot.py: cannot plot {' '.join(a.runs)}: {what}")


def plot(a):
    if a.kind != "curves":
        {"times": plot_times, "padding": plot_padding, "speedup": plot_speedup}[a.kind](a)
        return

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    (loss_it, loss_wall), (acc_it, acc_wall) = axes
    plotted = 0
    # Classifiers report test accuracy per epoch; the language model validation perplexity.
    quality, quality_label = "test_acc", "test accuracy (%)"
    for spec in a.runs:
        name, d = split_spec(spec)
        its = read_rows(d, "iterations")
        eps = read_rows(d, "epochs")
        if its is None and eps is None:
            sys.exit(f"plot.py: {d}: no iterations.csv/.jsonl or epochs.csv/.jsonl found")
        if not its and not eps:  # headers only: a run stopped before its first step
            sys.exit(f"plot.py: {d}: its metrics files hold no rows, nothing to plot")
        if its:
            steps = [r["step"] for r in its]
            loss = smooth([r["loss"] for r in its], a.smooth)
            loss_it.plot(steps, loss, label=name)
            loss_wall.plot([r["wall_s"] / 60 for r in its], loss, label=name)
        if eps:
            if "test_acc" not in eps[0] and "valid_ppl" in eps[0]:
                quality, quality_label = "valid_ppl", "validation perplexity"
            eps = [r for r in eps if quality in r]
            acc_it.plot([r["step"] for r in eps], [r[quality] for r in eps], marker="o", label=name)
            acc_wall.plot([r["wall_s"] / 60 for r in eps], [r[quality] for r in eps], marker="o",
                          label=name)
        plotted += 1
    loss_it.set(xlabel="iteration", ylabel=f"training loss (moving avg {a.smooth})", yscale="log")
    loss_wall.set(xlabel="wall time (min)", ylabel="training loss", yscale="log")
    acc_it.set(xlabel="iteration", ylabel=quality_label)
    acc_wall.set(xlabel="wall time (min)", ylabel=quality_label)
    finish(fig, axes.flat, a, plotted)


def finish(fig, axes, a, plotted):
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            # "best" placement scans every point: slow for thousands of iterations.
            ax.legend(fontsize=8, loc="best" if a.kind == "curves" else "upper right")
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"plot.py: wrote {a.output} ({plotted} run(s))")


def load_iterations(spec):
    name, d = split_spec(spec)
    rows = read_rows(d, "iterations")
    if rows is None:
        sys.exit(f"plot.py: {d}: no iterations.csv/.jsonl found")
    if not rows:
        sys.exit(f"plot.py: {d}: its iterations file holds no rows, nothing to plot")
    return name, d, rows


def plot_times(a):
    """Selection, exchange and exposed communication time per iteration."""
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    sel_ax, exch_ax, comm_ax = axes
    for spec in a.runs:
        name, _, rows = load_iterations(spec)
        steps = [r["step"] for r in rows]
        (line,) = comm_ax.plot(steps, [r.get("comm_ms", 0.0) for r in rows], label=name)
        if "sp_select_ms" in rows[0]:
            sel_ax.plot(steps, [r["sp_select_ms"] for r in rows], color=line.get_color(), label=name)
            exch_ax.plot(steps, [r["sp_exchange_ms"] for r in rows], color=line.get_color(),
                         label=name)
    sel_ax.set(xlabel="iteration", ylabel="selection ms (sum over buckets)", yscale="log")
    exch_ax.set(xlabel="iteration", ylabel="exchange ms (sum over buckets)", yscale="log")
    comm_ax.set(xlabel="iteration", ylabel="exposed communication ms", yscale="log")
    finish(fig, axes, a, len(a.runs))


def plot_padding(a):
    """Padding overhead of the padded index allgather, e.g. MiCRO vs ExDyna."""
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for spec in a.runs:
        name, d, rows = load_iterations(spec)
        rows = [r for r in rows if "sp_padding" in r and r.get("sp_density", 0.0) < 1.0]
        if not rows:
            sys.exit(f"plot.py: {d}: no sp_padding column (a sparsified run is needed)")
        pad = [r["sp_padding"] for r in rows]
        tail = pad[len(pad) // 2:]
        ax.plot([r["step"] for r in rows], pad,
                label=f"{name} (2nd-half mean {sum(tail) / len(tail):.3f})")
    ax.set(xlabel="iteration", ylabel="padding overhead  max k_i * P / sum k_i - 1")
    finish(fig, [ax], a, len(a.runs))


def plot_speedup(a):
    """Speedup over dense allreduce vs bandwidth, from reproduce.sh's summary.json."""
    rows = []
    for path in a.runs:
        if not os.path.isfile(path):
            sys.exit(f"plot.py: {path}: not a file (--kind speedup reads summary.json)")
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r.get("bandwidth", "none") != "none" and r.get("sparsifier") != "none"
            and r.get("speedup") == r.get("speedup") and r.get("speedup") is not None]
    if not rows:
        sys.exit("plot.py: no sparsified runs with a speedup under an emulated link in " + " ".join(a.runs))
    configs = sorted({(r["model"], r["ranks"]) for r in rows})
    fig, axes = plt.subplots(1, len(configs), figsize=(7 * len(configs), 5), squeeze=False)
    for ax, (model, ranks) in zip(axes[0], configs):
        series = {}
        for r in rows:
            if (r["model"], r["ranks"]) == (model, ranks):
                key = f"{r['sparsifier']}@{r['density']:g}" if r.get("density") else r["sparsifier"]
                key += f" [{r['tag']}]" if r.get("tag") else ""
                series.setdefault(key, {})[rate_bits(r["bandwidth"])] = r["speedup"]
        # More lines than the 10 default colours: vary marker and dash with the colour.
        for i, (key, pts) in enumerate(sorted(series.items())):
            xs = sorted(pts)
            ax.plot([x / 1e6 for x in xs], [pts[x] for x in xs], label=key, color=f"C{i % 10}",
                    marker="osD^v"[(i // 10) % 5], linestyle=["-", "--", ":"][(i // 10) % 3])
        ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
        ax.set(xscale="log", yscale="log", xlabel="emulated link (Mbit/s)",
               ylabel="iteration speedup over dense allreduce", title=f"{model}, P = {ranks}")
    finish(fig, axes[0], a, len(rows))


def rate_bits(bw):
    units = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
    for unit in ("kbit", "mbit", "gbit", "tbit", "bit"):
        if bw.endswith(unit):
            return float(bw[: -len(unit)]) * units[unit]
    raise ValueError(f"not a tc rate: {bw}")


if __name__ == "__main__":
    main()
