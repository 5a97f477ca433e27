#!/usr/bin/env python3
"""What overlapping communication with computation buys, from runs of each mode.

    scripts/overlap_report.py --no-overlap RUN... [--overlap RUN...]
                              [--forward-overlap RUN...] [--skip 10] [--tag k=v]

Each RUN is a `sparsetrain train --out` directory (rank 0's iterations.csv); give several
runs of a mode (e.g. alternated on a shared machine) and their iterations are pooled.
The modes: no-overlap (`--no-overlap`: every bucket exchanged after backward), overlap
(the default: buckets overlap backward, the step waits for all of them) and
forward-overlap (`--forward-overlap`: each bucket is applied as it arrives and the next forward
overlaps the buckets still in flight). Per mode it prints the median iteration time
(forward + backward + exposed communication + optimiser; data loading is left out),
forward, backward and exposed communication, as JSON lines, then per overlapped mode a
summary with

- hidden_fraction = 1 - exposed(mode) / exposed(no overlap): how much of the wait the
  pipeline removed. It does not see what the overlap costs elsewhere: a communication
  thread that competes with backward for the cores makes backward slower. Under
  forward overlap the waits for buckets inside the next forward count as forward time.
- saved_fraction = (iter(no overlap) - iter(mode)) / exposed(no overlap): how much of
  the communication time the iteration actually got back. 1 is perfect overlap at no
  cost; hidden_fraction - saved_fraction is roughly what the overlap cost in compute, as
  a fraction of the communication time.
- speedup = iter(no overlap) / iter(mode).
- bound_backward = min(1, backward / exchange) and bound_backward_forward =
  min(1, (backward + forward) / exchange), from the no-overlap runs: the most an
  exchange overlapped with backward alone, or with backward and the next forward, can
  save when it is longer than what it overlaps.
"""
import argparse
import csv
import json
import os
import statistics
import sys


def read_rows(run, skip):
    path = os.path.join(run, "iterations.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if len(rows) <= skip:
        sys.exit(f"overlap_report: {path} has {len(rows)} iterations, --skip is {skip}")
    return rows[skip:]


def summarize(runs, skip):
    rows = [r for run in runs for r in read_rows(run, skip)]
    col = lambda name: [float(r[name]) for r in rows]
    iters = [sum(v) for v in zip(col("fwd_ms"), col("bwd_ms"), col("comm_ms"), col("opt_ms"))]
    return {"runs": len(runs), "iterations": len(rows), "iter_ms": statistics.median(iters),
            "forward_ms": statistics.median(col("fwd_ms")),
            "backward_ms": statistics.median(col("bwd_ms")),
            "exposed_comm_ms": statistics.median(col("comm_ms"))}


def fractions(no, ov):
    comm = no["exposed_comm_ms"]
    return {"comm_after_backward_ms": comm, "exposed_with_overlap_ms": ov["exposed_comm_ms"],
            "hidden_fraction": 1 - ov["exposed_comm_ms"] / comm,
            "saved_fraction": (no["iter_ms"] - ov["iter_ms"]) / comm,
            "bound_backward": min(1.0, no["backward_ms"] / comm),
            "bound_backward_forward": min(1.0, (no["backward_ms"] + no["forward_ms"]) / comm),
            "backward_slowdown_ms": ov["backward_ms"] - no["backward_ms"],
            "speedup": no["iter_ms"] / ov["iter_ms"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-overlap", nargs="+", required=True, metavar="RUN")
    ap.add_argument("--overlap", nargs="+", default=[], metavar="RUN")
    ap.add_argument("--forward-overlap", nargs="+", default=[], metavar="RUN")
    ap.add_argument("--skip", type=int, default=10, help="warm-up iterations per run (10)")
    ap.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                    help="added to every JSON line (e.g. rate=100mbit)")
    a = ap.parse_args()
    if not a.overlap and not a.forward_overlap:
        ap.error("give --overlap or --forward-overlap runs (or both)")
    tags = dict(t.split("=", 1) for t in a.tag)
    res = {"no-overlap": summarize(a.no_overlap, a.skip)}
    for mode, runs in (("overlap", a.overlap), ("forward-overlap", a.forward_overlap)):
        if runs:
            res[mode] = summarize(runs, a.skip)
    rnd = lambda d: {k: round(v, 3) if isinstance(v, float) else v for k, v in d.items()}
    for mode, r in res.items():
        print(json.dumps({"bench": "overlap", "mode": mode, **tags, **rnd(r)}))
    for mode in ("overlap", "forward-overlap"):
        if mode in res:
            summary = fractions(res["no-overlap"], res[mode])
            print(json.dumps({"bench": "overlap_summary", "mode": mode, **tags, **rnd(summary)}))


if __name__ == "__main__":
    main()
