#!/usr/bin/python3
"""The tutorial's figures that no other script draws (docs/tutorial/; called by
scripts/tutorial_figures.sh):

  tutorial_plots.py plan PLAN.txt [NAME=PLAN.txt ...] -o PNG
      bucket sizes of `sparsetrain train --print-buckets` plans, in launch order
  tutorial_plots.py breakdown NAME=RUN ... -o PNG [--warmup 5]
      median step time of each run split into forward, backward, exposed communication,
      optimiser and the rest (iterations.csv of each run folder)
  tutorial_plots.py algos RESULTS.jsonl ... -o PNG
      median time of each allreduce algorithm against the buffer size, one panel per rank
      count (output of docs/tutorial/diy/allreduce_algorithms.cpp)
  tutorial_plots.py balance NAME=RUN ... -o PNG
      second-half means of each sparsified run's padding overhead and actual density / d
  tutorial_plots.py scaling --comm COMM.jsonl --run NAME=RUN ... --n N -o PNG [--alpha-us A]
      fits the link's alpha and beta to comm_bench output (scripts/scaling_model.py) and
      projects each measured run's iteration time to 2..256 workers on a switched network;
      --shared-compute NAME gives every curve NAME's compute time
  tutorial_plots.py lr NAME=RUN ... --ranks P ... -o PNG
      one panel per worker count P (run folders whose names end in _npP; the 1-rank run
      appears in every panel): test accuracy after each epoch, and a last panel with the
      training loss of the first epoch at the largest P, per step; prints one JSON line a run
  tutorial_plots.py zero MODELS.jsonl --arch NAME ... -o PNG
      per rank and worker count P: the optimiser state (SGD momentum, one float per
      parameter) and the bytes sent, DDP's ring allreduce against ZeRO stage 1 (reduce-
      scatter, update a shard, allgather); MODELS.jsonl is `sparsetrain models --json`.
      Prints one JSON line per architecture and P
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_model as sm  # noqa: E402


def named(arg):
    name, _, path = arg.rpartition("=")
    return (name or os.path.basename(os.path.normpath(path))), path


def read_plan(path):
    """[(bucket, elements, [parameter names])] from --print-buckets output."""
    rows = []
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*bucket (\d+): (\d+) elements, [0-9.e+-]+ MB:(.*)", line)
            if m:
                rows.append((int(m.group(1)), int(m.group(2)), m.group(3).split()))
    if not rows:
        sys.exit(f"tutorial_plots: no bucket plan in {path}")
    return rows


def plan(a):
    plans = [(name, read_plan(p)) for name, p in map(named, a.plans)]
    fig, axes = plt.subplots(len(plans), 1, figsize=(11, 1.2 + 1.6 * len(plans)), squeeze=False)
    for ax, (name, rows) in zip(axes[:, 0], plans):
        left = 0
        for b, n, params in rows:
            ax.barh(0, n, left=left, height=0.6, color=plt.cm.tab10(b % 10), edgecolor="white")
            label = f"b{b}\n{len(params)} params" if n > sum(r[1] for r in rows) / 25 else ""
            ax.text(left + n / 2, 0, label, ha="center", va="center", fontsize=7)
            left += n
        ax.set_yticks([])
        ax.set_xlim(0, left)
        ax.set_title(f"{name}: {len(rows)} buckets over {left:,} gradients "
                     f"(flat buffer order = launch order; left = last layer)", fontsize=9)
    axes[-1, 0].set_xlabel("position in the flat gradient buffer (elements)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"tutorial_plots: wrote {a.out}")


def read_iters(run):
    with open(os.path.join(run, "iterations.csv")) as f:
        return list(csv.DictReader(f))


def medians(run, warmup):
    rows = read_iters(run)
    rest = rows[warmup:] if len(rows) > warmup + 2 else rows[1:]
    med = lambda k: statistics.median(float(r[k]) for r in rest)
    walls = [float(r["wall_s"]) for r in rows]
    steps = [(walls[i] - walls[i - 1]) * 1e3 for i in range(max(1, len(rows) - len(rest)), len(rows))]
    out = {k: med(k) for k in ("data_ms", "fwd_ms", "bwd_ms", "comm_ms", "opt_ms")}
    out["step_ms"] = statistics.median(steps)
    return out


def breakdown(a):
    runs = [(name, medians(path, a.warmup)) for name, path in map(named, a.runs)]
    parts = [("fwd_ms", "forward", "#4c78a8"), ("bwd_ms", "backward", "#59a14f"),
             ("comm_ms", "exposed communication", "#e15759"), ("opt_ms", "optimizer", "#b07aa1")]
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.7 * len(runs)))
    for i, (name, m) in enumerate(runs):
        left = 0
        for key, label, color in parts:
            ax.barh(i, m[key], left=left, color=color, label=label if i == 0 else None)
            left += m[key]
        other = max(0.0, m["step_ms"] - left)
        ax.barh(i, other, left=left, color="#c0c0c0", label="data and the rest" if i == 0 else None)
        ax.text(left + other, i, f"  {m['step_ms']:.0f} ms", va="center", fontsize=8)
        print(json.dumps({"run": name, **{k: round(v, 2) for k, v in m.items()}}))
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([n for n, _ in runs])
    ax.invert_yaxis()
    ax.set_xlabel("median time per step (ms)")
    ax.set_xlim(0, max(m["step_ms"] for _, m in runs) * 1.18)
    ax.legend(fontsize=8, ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    if a.title:
        fig.suptitle(a.title, fontsize=10, y=0.995)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"tutorial_plots: wrote {a.out}")


def second_half(run, key):
    rows = read_iters(run)
    vals = [float(r[key]) for r in rows[len(rows) // 2:] if r.get(key, "") != ""]
    return statistics.mean(vals) if vals else float("nan")


def balance(a):
    """Second-half means of the padding overhead and of actual density / d, one bar each:
    the per-step padding curves of these runs swing more than they differ."""
    runs = [(name, path) for name, path in map(named, a.runs)]
    fig, (pad_ax, dens_ax) = plt.subplots(1, 2, figsize=(10, 1.4 + 0.55 * len(runs)), sharey=True)
    for i, (name, path) in enumerate(runs):
        with open(os.path.join(path, "config.json")) as f:
            d = float(json.load(f).get("density", 0.01))
        pad, dens = second_half(path, "sp_padding"), second_half(path, "sp_density") / d
        color = plt.cm.tab10(i % 10)
        pad_ax.barh(i, pad, color=color)
        pad_ax.text(pad, i, f" {pad:.2f}", va="center", fontsize=8)
        dens_ax.barh(i, dens, color=color)
        dens_ax.text(dens, i, f" {dens:.2f}", va="center", fontsize=8)
        print(json.dumps({"run": name, "padding": round(pad, 4), "density_over_d": round(dens, 4)}))
    pad_ax.set_yticks(range(len(runs)))
    pad_ax.set_yticklabels([n for n, _ in runs])
    pad_ax.invert_yaxis()
    pad_ax.set_xlabel("padding overhead max_i k_i P / sum_i k_i - 1\n(second-half mean)")
    dens_ax.set_xlabel("actual density / d (second-half mean)")
    dens_ax.axvline(1.0, color="black", lw=0.8, ls="--")
    for ax in (pad_ax, dens_ax):
        ax.set_xlim(0, ax.get_xlim()[1] * 1.15)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"tutorial_plots: wrote {a.out}")


def algos(a):
    """allreduce_algorithms output (docs/tutorial/diy/): median ms vs bytes per algorithm,
    one panel per rank count."""
    recs = []
    for path in a.results:
        with open(path) as f:
            recs += [json.loads(line) for line in f if line.startswith("{")]
    ranks = sorted({r["ranks"] for r in recs})
    fig, axes = plt.subplots(1, len(ranks), figsize=(4 * len(ranks), 3.6), squeeze=False)
    for ax, P in zip(axes[0], ranks):
        for name in ("mpi", "ring", "tree", "recursive_doubling"):
            pts = sorted((r["bytes"], r["median_ms"], r["steps"]) for r in recs
                         if r["ranks"] == P and r["algo"] == name)
            if pts:
                label = name if name == "mpi" else f"{name} ({pts[0][2]} steps)"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set(xscale="log", yscale="log", xlabel="bytes per rank", title=f"{P} ranks")
        ax.grid(True, which="both", color="#e0e0e0", lw=0.5)
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("median ms per allreduce")
    if a.title:
        fig.suptitle(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"tutorial_plots: wrote {a.out}")


def run_stats(run, warmup, n):
    """A measured run's compute and exchange sizes in the form scaling_model.py takes."""
    with open(os.path.join(run, "config.json")) as f:
        cfg = json.load(f)
    sparsifier = cfg.get("sparsifier", "none") or "none"
    rows = read_iters(run)[warmup:]
    med = lambda k: statistics.median(float(r[k]) for r in rows) if k in rows[0] else 0.0
    row = {"sparsifier": sparsifier, "density": float(cfg.get("density", 0.01)),
           **{k: med(k) for k in ("data_ms", "fwd_ms", "bwd_ms", "opt_ms", "sp_k", "sp_local",
                                  "sp_global", "sp_bytes", "sp_select_ms", "sp_decode_ms")}}
    ranks = int(cfg.get("world_size", cfg.get("ranks", 1)))
    return row, ranks, (sm.stats_from_row(row, n) if sparsifier != "none" else {})


def scaling(a):
    sm.load_sparsifiers(a.sparsifiers_json)
    fit = sm.fit_link(sm.load_comm(a.comm))
    print(json.dumps({"fit": fit}))
    # Two ranks give every allreduce the same step count, so comm_bench on 2 ranks pins the
    # link's rate (beta) well but not its latency; the projection takes alpha as given.
    if a.alpha_us is not None:
        fit["alpha_s"] = a.alpha_us * 1e-6
    workers = [2, 4, 8, 16, 32, 64, 128, 256]
    runs = [(name, *run_stats(path, a.warmup, a.n)) for name, path in map(named, a.run)]
    # One compute time for every curve (the first run's, or --shared-compute's): each run's
    # own measured compute is noisy on a shared machine (tens of ms between reruns), more
    # than the exchanges the model compares, so the curves differ by communication only.
    shared = next((r for r in runs if r[0] == a.shared_compute), runs[0]) \
        if a.shared_compute is not None else None
    if shared is not None:
        print(json.dumps({"shared_compute_ms": round(sm.compute_ms(shared[1]), 2),
                          "from": shared[0]}))
    fig, ax = plt.subplots(figsize=(8, 4.6))
    for name, row, ranks, stats in runs:
        if shared is not None:
            compute = sm.compute_ms(shared[1]) / 1e3
        else:
            compute = sm.compute_ms(row) / 1e3 + (row["sp_select_ms"] + row["sp_decode_ms"]) / 1e3
        d = row["density"]
        ys, comms = [], []
        for P in workers:
            s = sm.project_stats(row["sparsifier"], stats, ranks, P, a.n, d) if stats else {}
            comm = sm.exchange_time(row["sparsifier"], P, a.n, s, fit["alpha_s"],
                                    fit["beta_s_per_byte"], "switched")
            ys.append((compute + comm) * 1e3)
            comms.append(comm * 1e3)
        ax.plot(workers, ys, marker="o", label=f"{name} (sizes measured on {ranks} ranks)")
        print(json.dumps({"run": name, "ranks": ranks, "projected_ms": dict(zip(workers, ys)),
                          "comm_ms": dict(zip(workers, comms))}))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(workers)
    ax.set_xticklabels([str(w) for w in workers])
    ax.set_xlabel("workers P (switched network, each worker its own link)")
    ax.set_ylabel("projected time per iteration (ms)")
    ax.set_title(f"alpha = {fit['alpha_s'] * 1e6:.0f} us{'' if a.alpha_us is None else ' (given)'}, "
                 f"link {fit['rate_mbit']:.0f} Mbit/s (fitted); n = {a.n:,} gradients; "
                 f"no overlap credited"
                 f"{'' if shared is None else '; compute of ' + shared[0] + ' for all'}", fontsize=9)
    ax.grid(True, which="both", color="#e0e0e0", lw=0.5)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"tutorial_plots: wrote {a.out}")


def read_epochs(run):
    with open(os.path.join(run, "epochs.csv")) as f:
        return list(csv.DictReader(f))


def lr_runs(a):
    """(name, path, ranks) of each NAME=RUN argument; the ranks from the _npP suffix."""
    runs = []
    for name, path in map(named, a.runs):
        m = re.search(r"_np(\d+)$", os.path.basename(os.path.normpath(path)))
        if not m:
            sys.exit(f"tutorial_plots lr: run folder {path!r} does not end in _npP")
        runs.append((name, path, int(m.group(1))))
    return runs


def lr(a):
    """Learning rate against the number of workers at equal epochs: kept, scaled by P,
    scaled with a warm-up (Goyal et al. 2017, sec. 2)."""
    runs = lr_runs(a)
    fig, axes = plt.subplots(1, len(a.ranks) + 1, figsize=(4.6 * (len(a.ranks) + 1), 4.2))
    for name, path, P in runs:
        epochs = read_epochs(path)
        iters = read_iters(path)
        first = [float(r["loss"]) for r in iters if int(r["epoch"]) == 0]
        print(json.dumps({"run": os.path.basename(os.path.normpath(path)), "ranks": P, "lr": float(iters[-1]["lr"]),
                          "test_acc": [float(e["test_acc"]) for e in epochs],
                          "test_loss": [float(e["test_loss"]) for e in epochs],
                          "first_epoch_max_loss": max(first), "steps": len(iters)}))
        for ax, panel_p in zip(axes, a.ranks):
            if P in (1, panel_p):
                ax.plot(range(1, len(epochs) + 1), [float(e["test_acc"]) for e in epochs],
                        "o-" if P > 1 else "k--", label=name)
        if P == max(a.ranks) or P == 1:
            axes[-1].plot([(i + 1) / len(first) for i in range(len(first))], first,
                          "k--" if P == 1 else "-", label=name)
    for ax, P in zip(axes, a.ranks):
        ax.set_title(f"{P} workers, batch 32 each ({32 * P} a step)", fontsize=10)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(True, color="#e0e0e0", lw=0.5)
        ax.legend(fontsize=7)
    last = axes[-1]
    last.set_yscale("log")
    last.set_title(f"first epoch, training loss per step, {max(a.ranks)} workers", fontsize=10)
    last.set_xlabel("epoch")
    last.set_ylabel("training loss (log)")
    last.grid(True, which="both", color="#e0e0e0", lw=0.5)
    last.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"tutorial_plots: wrote {a.out}")


def zero(a):
    """DDP against ZeRO-1, per rank: state floats and bytes sent, for P = 1 to 256."""
    with open(a.models) as f:
        params = {m["name"]: m["params"] for m in map(json.loads, f) if m.get("name")}
    workers = [2 ** i for i in range(9)]
    fig, (mem, net) = plt.subplots(1, 2, figsize=(11, 4.2))
    for arch in a.arch:
        n = params[arch]
        rows = []
        for P in workers:
            # Ring allreduce: 2 (P - 1)/P n values per rank; ZeRO-1's reduce-scatter and
            # allgather are its two halves, (P - 1)/P n each (Rajbhandari et al., SC 2020).
            ring = 2 * (P - 1) / P * n * 4
            rows.append({"arch": arch, "P": P, "n": n, "ddp_state_floats": n,
                         "zero1_state_floats": -(-n // P), "ddp_bytes": round(ring),
                         "zero1_bytes": round((P - 1) / P * n * 4 + (P - 1) / P * n * 4)})
        for r in rows:
            print(json.dumps(r))
        mem.plot(workers, [r["ddp_state_floats"] for r in rows], "o-", label=f"{arch}, DDP")
        mem.plot(workers, [r["zero1_state_floats"] for r in rows], "s--", label=f"{arch}, ZeRO-1")
        net.plot(workers, [r["ddp_bytes"] / 1e6 for r in rows], "o-", label=f"{arch}, DDP")
        net.plot(workers, [r["zero1_bytes"] / 1e6 for r in rows], "s--", label=f"{arch}, ZeRO-1")
    for ax, title, unit in ((mem, "optimiser state per rank (SGD momentum)", "floats"),
                            (net, "bytes sent per rank and step", "MB")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("workers P")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.legend(fontsize=8)
    mem.set_yscale("log")
    fig.suptitle("DDP's allreduce against ZeRO stage 1 (computed from the parameter counts)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="kind", required=True)
    p = sub.add_parser("plan")
    p.add_argument("plans", nargs="+")
    p = sub.add_parser("breakdown")
    p.add_argument("runs", nargs="+")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--title")
    p = sub.add_parser("algos")
    p.add_argument("results", nargs="+")
    p.add_argument("--title")
    p = sub.add_parser("balance")
    p.add_argument("runs", nargs="+")
    p = sub.add_parser("scaling")
    p.add_argument("--comm", nargs="+", required=True)
    p.add_argument("--run", nargs="+", required=True)
    p.add_argument("--sparsifiers-json", required=True)
    p.add_argument("--n", type=int, required=True, help="gradient count of the model")
    p.add_argument("--alpha-us", type=float, help="latency per message step in us (default: fitted)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--shared-compute", metavar="NAME",
                   help="every curve takes this run's compute time (default: each its own)")
    p = sub.add_parser("lr")
    p.add_argument("runs", nargs="+")
    p.add_argument("--ranks", type=int, nargs="+", required=True)
    p = sub.add_parser("zero")
    p.add_argument("models")
    p.add_argument("--arch", nargs="+", required=True)
    for p in sub.choices.values():
        p.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    {"plan": plan, "breakdown": breakdown, "balance": balance, "algos": algos,
     "scaling": scaling, "lr": lr, "zero": zero}[a.kind](a)


if __name__ == "__main__":
    main()
