#!/usr/bin/python3
"""Draws a sparsetrain Chrome trace (`sparsetrain train --trace FILE`, docs/TRACE.md) as one
PNG: every rank is a band, every track (data, forward, backward, comm, optimizer) a row, on
one shared time axis.

  scripts/timeline.py TRACE.json -o timeline.png [--steps 2] [--title TEXT]

What is drawn, per rank:
  data       `data wait` spans (the training thread waiting for the loader)
  forward    the forward pass
  backward   one span per layer (alternating shades), `ready bucket B` marks (black
             triangles: the bucket's last gradient became ready)
  comm       `launch bucket B` marks (orange ticks), `wait for peers` (grey hatched),
             the exchange spans (red, labelled with the bucket when wide enough)
  optimizer  the SGD step
  emu ... stream   on the emulated device (--device emu), what each stream's executor ran
             and when: kernels (teal), copies (yellow), waits for an event recorded on
             another stream (grey hatched), event records (black ticks); rows ordered
             compute, comm, collective, copy stream
The red bar under a rank's comm row is its *exposed* communication: the part of the
exchanges that ran after that rank's backward ended.
Needs matplotlib (Debian's python3-matplotlib; scripts/setup.sh installs it).
"""
import argparse
import json
import re
import sys

TRACKS = ["data", "forward", "backward", "comm", "optimizer"]
STREAMS = ["emu compute stream", "emu comm stream", "emu collective stream", "emu copy stream"]
COLORS = {"data": "#9e9e9e", "forward": "#4c78a8", "backward": ("#59a14f", "#8cd17d"),
          "wait": "#d0d0d0", "exchange": "#e15759", "optimizer": "#b07aa1",
          "launch": "#f28e2b", "ready": "black", "exposed": "#e15759",
          "kernel": "#76b7b2", "copy": "#edc948"}


def row_order(names):
    """The step's tracks, then the emulated device's streams, then any other, by name."""
    rank = lambda n: (STREAMS.index(n) if n in STREAMS else len(STREAMS), n)
    return TRACKS + sorted(set(names) - set(TRACKS), key=rank)


def draw_stream_task(ax, e, x0, w, y):
    """One task a stream executor ran (an `emu ... stream` track)."""
    if e["mark"]:
        ax.plot([x0, x0], [y - 0.3, y + 0.3], color="black", lw=0.8, zorder=4)
    elif e["name"] == "wait for event":
        ax.barh(y, w, left=x0, height=0.6, color=COLORS["wait"], hatch="////",
                edgecolor="#8a8a8a", linewidth=0, zorder=2)
    else:
        color = COLORS["copy"] if e["name"] == "copy" else COLORS["kernel"]
        ax.barh(y, w, left=x0, height=0.6, color=color, edgecolor="white", linewidth=0.3,
                zorder=3)


class DamagedTrace(ValueError):
    """A trace that parses but holds what no run writes (its message says what)."""


def load(path):
    """{rank: {track: [events]}} with times in ms, and the rank names."""
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    tracks, ranks = {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        if e["name"] == "thread_name":
            tracks[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["name"] == "process_name":
            ranks[e["pid"]] = e["args"]["name"]
    out = {}
    for e in events:
        if e.get("ph") not in ("X", "i", "I"):
            continue
        track = tracks.get((e["pid"], e.get("tid")), e.get("cat", "other"))
        if e.get("dur", 0) < 0:  # drawn backwards, it would cover what came before it
            raise DamagedTrace(f"event '{e['name']}' at ts {e['ts']} has a negative duration "
                               f"({e['dur']} us)")
        ev = {"name": e["name"], "t0": e["ts"] / 1e3, "t1": (e["ts"] + e.get("dur", 0)) / 1e3,
              "mark": e["ph"] != "X", "args": e.get("args", {})}
        out.setdefault(e["pid"], {}).setdefault(track, []).append(ev)
    if not out:
        sys.exit(f"timeline: {path} holds no events")
    return out, ranks


def step_windows(ranks):
    """(steps, begins): the traced steps (from the `backward step S` spans) and where each
    begins: per rank, the last data wait or forward that starts before its backward; the
    earliest of those over the ranks."""
    begin = {}
    for tr in ranks.values():
        before = sorted(e["t0"] for k in ("data", "forward") for e in tr.get(k, []))
        for e in tr.get("backward", []):
            m = re.fullmatch(r"backward step (\d+)", e["name"])
            if not m:
                continue
            pre = [t for t in before if t <= e["t0"]]
            # the step's data wait is the last data/forward start before the forward
            t = pre[-2] if len(pre) >= 2 else (pre[-1] if pre else e["t0"])
            s = int(m.group(1))
            begin[s] = min(begin.get(s, t), t)
    steps = sorted(begin)
    return steps, [begin[s] for s in steps]


def clip_to_steps(ranks, first, count):
    steps, begins = step_windows(ranks)
    if not steps or count <= 0:
        return ranks, None
    i0 = min(max(0, first), len(steps) - 1)
    i1 = i0 + count
    t0 = begins[i0]
    t1 = begins[i1] if i1 < len(begins) else float("inf")
    kept = {pid: {k: [e for e in evs if t0 <= e["t0"] < t1] for k, evs in tr.items()}
            for pid, tr in ranks.items()}
    return kept, (steps[i0], steps[min(i1, len(steps)) - 1])


def exposed(tr):
    """[(begin, end)] of comm time after each backward ended (per step)."""
    spans = []
    for b in [e for e in tr.get("backward", []) if e["name"].startswith("backward step")]:
        nxt = [e["t0"] for e in tr.get("optimizer", []) if e["t0"] >= b["t1"]]
        stop = min(nxt) if nxt else float("inf")
        late = [e["t1"] for e in tr.get("comm", []) if not e["mark"] and b["t1"] < e["t1"] <= stop]
        if late and max(late) > b["t1"]:
            spans.append((b["t1"], max(late)))
    return spans


def draw(ranks, names, out, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D

    pids = sorted(ranks)
    t_min = min(e["t0"] for tr in ranks.values() for evs in tr.values() for e in evs)
    t_max = max(e["t1"] for tr in ranks.values() for evs in tr.values() for e in evs)
    rows = row_order({k for tr in ranks.values() for k in tr})
    band = len(rows) + 1.2  # rows per rank plus a gap
    fig_h = 0.9 + 0.32 * band * len(pids)
    fig, ax = plt.subplots(figsize=(14, fig_h))
    span_ms = t_max - t_min
    yticks, ylabels = [], []
    for bi, pid in enumerate(pids):
        tr = ranks[pid]
        base = bi * band
        ax.axhspan(base - 0.6, base + len(rows) - 0.2, color="#f4f4f4" if bi % 2 else "#fbfbfb",
                   zorder=0)
        for ri, row in enumerate(rows):
            y = base + ri
            yticks.append(y)
            ylabels.append(f"{names.get(pid, pid)}  {row}" if ri == 0 else row)
            for n, e in enumerate(tr.get(row, [])):
                x0, w = e["t0"] - t_min, e["t1"] - e["t0"]
                if row == "backward":
                    if e["mark"]:
                        ax.plot(x0, y - 0.42, marker="v", color=COLORS["ready"], markersize=5,
                                zorder=5)
                        continue
                    if e["name"].startswith("backward step"):
                        ax.barh(y, w, left=x0, height=0.8, fill=False, edgecolor="#2f6b29",
                                linewidth=0.8, zorder=3)
                        continue
                    shade = COLORS["backward"][n % 2]
                    ax.barh(y, w, left=x0, height=0.6, color=shade, edgecolor="none", zorder=2)
                elif row == "comm":
                    if e["mark"]:
                        ax.plot([x0, x0], [y - 0.4, y + 0.4], color=COLORS["launch"], lw=1.2,
                                zorder=4)
                        continue
                    if e["name"].startswith("wait for peers"):
                        ax.barh(y, w, left=x0, height=0.6, color=COLORS["wait"], hatch="////",
                                edgecolor="#8a8a8a", linewidth=0, zorder=2)
                        continue
                    ax.barh(y, w, left=x0, height=0.6, color=COLORS["exchange"],
                            edgecolor="white", linewidth=0.4, zorder=3)
                    b = e["args"].get("bucket")
                    if b is not None and w > span_ms / 60:
                        ax.text(x0 + w / 2, y, f"b{b}", ha="center", va="center", fontsize=7,
                                color="white", zorder=6)
                elif row.startswith("emu "):
                    draw_stream_task(ax, e, x0, w, y)
                else:
                    color = COLORS.get(row, "#76b7b2")
                    if e["mark"]:
                        ax.plot(x0, y, marker="|", color=color, zorder=4)
                    else:
                        ax.barh(y, w, left=x0, height=0.6, color=color, edgecolor="none",
                                zorder=2)
        y_comm = base + rows.index("comm") + 0.5
        for a, b in exposed(tr):
            ax.plot([a - t_min, b - t_min], [y_comm, y_comm], color=COLORS["exposed"], lw=3,
                    solid_capstyle="butt", zorder=6)
    ax.set_yticks(yticks)
    ax.set_yticklabels(ylabels, fontsize=8)
    ax.set_ylim(len(pids) * band - 1.2, -0.9)
    ax.set_xlim(0, span_ms * 1.01)
    ax.set_xlabel("time (ms)")
    ax.grid(axis="x", color="#dddddd", lw=0.5)
    ax.set_title(title, fontsize=10)
    legend = [Patch(color=COLORS["data"], label="data wait"),
              Patch(color=COLORS["forward"], label="forward"),
              Patch(color=COLORS["backward"][0], label="backward (one span per layer)"),
              Line2D([], [], marker="v", color=COLORS["ready"], lw=0, label="bucket ready"),
              Line2D([], [], color=COLORS["launch"], lw=1.5, label="bucket launched"),
              Patch(facecolor=COLORS["wait"], hatch="////", edgecolor="#8a8a8a",
                    label="wait for peers"),
              Patch(color=COLORS["exchange"], label="exchange (bN = bucket N)"),
              Line2D([], [], color=COLORS["exposed"], lw=3, label="exposed communication"),
              Patch(color=COLORS["optimizer"], label="optimizer")]
    if any(r.startswith("emu ") for r in rows):
        legend += [Patch(color=COLORS["kernel"], label="stream: kernel"),
                   Patch(color=COLORS["copy"], label="stream: copy"),
                   Patch(facecolor=COLORS["wait"], hatch="////", edgecolor="#8a8a8a",
                         label="stream: wait for event"),
                   Line2D([], [], color="black", lw=0.8, label="stream: event recorded")]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.09 - 0.6 / fig_h),
              ncol=5, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"timeline: wrote {out} ({len(pids)} ranks, {span_ms:.1f} ms)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="Chrome-trace JSON written by sparsetrain train --trace")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--steps", type=int, default=2,
                    help="traced steps to draw (default 2; 0 = all)")
    ap.add_argument("--first", type=int, default=0,
                    help="index of the first traced step drawn (default 0)")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    # A damaged or foreign trace gives one line naming it, not a traceback.
    try:
        ranks, names = load(a.trace)
        ranks, shown = clip_to_steps(ranks, a.first, a.steps)
        title = a.title or a.trace
        if shown:
            title += f"  (steps {shown[0]}-{shown[1]})" if shown[0] != shown[1] else f"  (step {shown[0]})"
        draw(ranks, names, a.out, title)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        sys.exit(f"timeline: cannot draw {a.trace}: {reason(e)}")


def reason(e):
    """An exception as one line: what was wrong with the input."""
    if isinstance(e, json.JSONDecodeError):
        return f"not JSON ({e.msg} at line {e.lineno} column {e.colno})"
    if isinstance(e, DamagedTrace):
        return str(e)
    if isinstance(e, KeyError):
        return f"an event lacks the field {e}"
    if isinstance(e, OSError):
        return e.strerror or str(e)
    return f"not a Chrome trace ({type(e).__name__}: {' '.join(str(e).split())})"


if __name__ == "__main__":
    main()
