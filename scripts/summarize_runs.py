#!/usr/bin/python3
"""One summary row per run folder: final test accuracy, wall time, and (for sparsified runs)
the mean actual density over the second half of training, mean padding overhead and mean
selection / exchange time per iteration, rank 0's selected count over its target k averaged
over the whole run (SIDCo's achieved/target density), and the compression ratio: dense
gradient bytes (4 n, n = k / d) over the payload a rank puts on the wire per iteration.

  scripts/summarize_runs.py runs/a runs/b ... [--markdown]
"""
import csv
import json
import os
import statistics
import sys


def summarize(d):
    eps = list(csv.DictReader(open(os.path.join(d, "epochs.csv"))))
    its = list(csv.DictReader(open(os.path.join(d, "iterations.csv"))))
    cfg = json.load(open(os.path.join(d, "config.json"))) if os.path.exists(os.path.join(d, "config.json")) else {}
    row = {"run": os.path.basename(d.rstrip("/")), "sparsifier": cfg.get("sparsifier", "none"),
           "density": float(cfg.get("density", 0)) if cfg.get("sparsifier", "none") != "none" else 1.0,
           "epochs": len(eps), "test_acc": float(eps[-1]["test_acc"]), "wall_s": float(eps[-1]["wall_s"])}
    half = its[len(its) // 2:]
    if half and "sp_density" in half[0]:
        row["actual_density_2nd_half"] = statistics.mean(float(r["sp_density"]) for r in half)
        row["padding_overhead"] = statistics.mean(float(r["sp_padding"]) for r in half)
        row["select_ms"] = statistics.mean(float(r["sp_select_ms"]) for r in half)
        row["exchange_ms"] = statistics.mean(float(r["sp_exchange_ms"]) for r in half)
        row["exposed_comm_ms"] = statistics.mean(float(r["comm_ms"]) for r in half)
        sparse = [r for r in its if float(r["sp_k"]) > 0]
        if sparse:
            k = statistics.mean(float(r["sp_k"]) for r in sparse)
            row["local_over_k"] = statistics.mean(float(r["sp_local"]) for r in sparse) / k
            sent = statistics.mean(float(r["sp_bytes"]) for r in sparse)
            if sent > 0:
                row["compression"] = 4.0 * k / row["density"] / sent
    else:
        row["exposed_comm_ms"] = statistics.mean(float(r["comm_ms"]) for r in half)
    return row


def main():
    md = "--markdown" in sys.argv
    rows = [summarize(d) for d in sys.argv[1:] if d != "--markdown"]
    if not md:
        for r in rows:
            print(json.dumps(r))
        return
    print("| run | sparsifier | d | epochs | test acc % | wall s | actual density (2nd half) | actual/d | padding overhead | select ms | exchange ms | exposed comm ms | local/k (all) | compression |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ad = r.get("actual_density_2nd_half")
        print("| {} | {} | {} | {} | {:.2f} | {:.0f} | {} | {} | {} | {} | {} | {:.1f} |".format(
            r["run"], r["sparsifier"], r["density"], r["epochs"], r["test_acc"], r["wall_s"],
            f"{ad:.4f}" if ad is not None else "-", f"{ad / r['density']:.2f}" if ad is not None else "-",
            f"{r['padding_overhead']:.3f}" if "padding_overhead" in r else "-",
            f"{r['select_ms']:.2f}" if "select_ms" in r else "-",
            f"{r['exchange_ms']:.1f}" if "exchange_ms" in r else "-", r["exposed_comm_ms"])
            + " {} | {} |".format(f"{r['local_over_k']:.2f}" if "local_over_k" in r else "-",
                                 f"{r['compression']:.1f}x" if "compression" in r else "-"))


if __name__ == "__main__":
    main()
