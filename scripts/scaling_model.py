#!/usr/bin/python3
"""Alpha-beta cost model of the gradient exchange: fits a link's latency alpha
(s per message step) and inverse bandwidth beta (s per byte) to bench/comm_bench output,
checks the model's iteration time against measured runs (summary.json of
scripts/reproduce.sh), and projects iteration time to 8..256 workers for ResNet-50 and the
LSTM language model. Equations: docs/REPRODUCE.md, "Scaling model".

  scripts/scaling_model.py --comm runs/reproduce/link/comm_np*_*/comm.jsonl \\
      --summary runs/reproduce/summary.json --sparsifiers-json runs/reproduce/sparsifiers.json \\
      --out runs/reproduce

Each method's exchange pattern comes from `sparsetrain sparsifiers --json` (the registry,
sparsify/registry.cpp), which scripts/reproduce.sh saves as sparsifiers.json in its output
folder; a method missing from it is an error, never a guess.

Collectives (Open MPI's tuned component uses ring allreduce and ring allgather(v) for the
large messages that carry the dense gradient; the small sparse messages pay the same number
of latency steps in this model, P - 1 per ring pass):
  ring allreduce of n bytes:    2 (P-1) alpha + 2 (P-1)/P n beta
  allgatherv of m_1..m_P bytes: (P-1) alpha + (P-1)/P (sum_i m_i) beta
  padded allgather (union):     counts: (P-1) alpha + (P-1) 8 beta, then
                                (P-1) alpha + (P-1) max_i m_i beta   (every rank sends max_i m_i)
Topologies: "switched" (every worker has its own full-duplex link: the formulas above) is
what the projections use. The emulated link of scripts/netns_run.sh is "shared": all ranks'
traffic crosses one rate-limited loopback, so the beta term is the bytes *all* ranks send,
i.e. P times the per-rank volume (ring allreduce: 2 (P-1) n beta).
"""
import argparse
import json
import math
import os
import statistics
import sys

# The sparsifiers of `sparsetrain sparsifiers --json`, by name (load_sparsifiers).
_METHODS = {}


def load_sparsifiers(listing):
    """Takes the parsed `sparsetrain sparsifiers --json` (or a file path to it)."""
    if isinstance(listing, str):
        with open(listing) as f:
            listing = json.load(f)
    _METHODS.clear()
    _METHODS.update({m["name"]: m for m in listing["sparsifiers"]})


def _method(sparsifier):
    if sparsifier not in _METHODS:
        raise ValueError(f"unknown sparsifier '{sparsifier}': not in the sparsifier listing ("
                         f"{', '.join(_METHODS) or 'none loaded; pass --sparsifiers-json'})")
    return _METHODS[sparsifier]


def pattern(sparsifier):
    """How a method's selections travel (sparsify/sparsifier.h ExchangePattern):
    dense, union-allreduce, allgather-sum, shared-indices, leader-indices or low-rank. "none" is the
    CLI's plain dense allreduce, outside the sparsify pipeline."""
    return "dense" if sparsifier == "none" else _method(sparsifier)["pattern"]


def partitioned(sparsifier):
    """Does each rank select only in its own partition (n / P elements; MiCRO, ExDyna)?"""
    return sparsifier != "none" and _method(sparsifier)["partitioned"]

# Parameter counts. The LSTM: embedding 10000x200 + 2 LSTM layers 4h(in+h) + 8h with
# h = in = 200 + untied decoder 200x10000 + 10000 (docs/LSTM.md, fortunes vocabulary 10000).
PARAMS = {
    "resnet50": 25_557_032,
    "lstm": 10000 * 200 + 2 * (4 * 200 * 400 + 8 * 200) + 200 * 10000 + 10000,
    "resnet20": 272_474,
    "small_cnn": 50_282,
}
FIRST_BUCKET_MB, BUCKET_CAP_MB = 1.0, 25.0  # sparsetrain's defaults


# ---------------------------------------------------------------- collectives


def coll(op, P, nbytes, maxbytes=None, topology="switched"):
    """(latency steps, beta bytes) of one collective. nbytes: allreduce buffer, or the sum of
    all ranks' contributions for allgatherv; maxbytes: the largest contribution (padded)."""
    if P <= 1:
        return 0.0, 0.0
    shared = P if topology == "shared" else 1
    if op == "allreduce":
        return 2 * (P - 1), 2 * (P - 1) / P * nbytes * shared
    if op == "allgatherv":
        return P - 1, (P - 1) / P * nbytes * shared
    if op == "padded":
        m = nbytes if maxbytes is None else maxbytes
        return 2 * (P - 1), ((P - 1) * 8 + (P - 1) * m) * shared
    if op == "bcast":  # binomial tree: each of log2 P levels forwards the whole message
        levels = math.ceil(math.log2(P))
        return levels, (P - 1) * nbytes if topology == "shared" else levels * nbytes
    raise ValueError(f"unknown collective {op}")


def coll_time(op, P, nbytes, alpha, beta, maxbytes=None, topology="switched"):
    steps, vol = coll(op, P, nbytes, maxbytes, topology)
    return steps * alpha + vol * beta


# ---------------------------------------------------------------- fitting


def load_comm(paths):
    recs = []
    for path in paths:
        link = os.path.basename(os.path.dirname(path)).split("_")[-1]  # comm_np4_100mbit
        with open(path) as f:
            for line in f:
                if line.strip().startswith("{"):
                    r = json.loads(line)
                    r["link"] = link
                    recs.append(r)
    return recs


def bench_coeffs(r):
    """(steps, beta bytes) of one comm_bench record on the shared emulated link."""
    P, b = r["ranks"], r["bytes"]
    if r["op"] == "allreduce":
        return coll("allreduce", P, b, topology="shared")
    if r["op"] == "allgatherv":
        return coll("allgatherv", P, r["result_bytes"], topology="shared")
    return coll("padded", P, None, r["result_bytes"] / P, topology="shared")


def _fit(rows):
    """Least squares on relative error of t = steps alpha + bytes beta, alpha, beta >= 0
    (normal equations of sum ((s a + v b - t) / t)^2, solved in closed form)."""
    saa = sum((s / t) ** 2 for (s, v), t in rows)
    sbb = sum((v / t) ** 2 for (s, v), t in rows)
    sab = sum(s * v / t ** 2 for (s, v), t in rows)
    sat = sum(s / t for (s, v), t in rows)
    sbt = sum(v / t for (s, v), t in rows)
    det = saa * sbb - sab * sab
    alpha = (sat * sbb - sbt * sab) / det if det else 0.0
    beta = (sbt * saa - sat * sab) / det if det else 0.0
    if alpha < 0:
        alpha, beta = 0.0, sbt / sbb
    if beta < 0:
        alpha, beta = sat / saa, 0.0
    return alpha, beta


def fit_link(recs):
    """alpha, beta of one link from comm_bench records. Four ranks on two cores sometimes
    lose a scheduler slice inside a collective (a 64 KB allreduce taking 100x its usual
    time), so points off by more than max(25%, 3x the median error) are dropped and the
    fit is repeated once."""
    rows = [(bench_coeffs(r), r["median_ms"] / 1e3) for r in recs]
    # Transfers below 256 KB through the bottleneck partly ride netns_run.sh's token bucket
    # (up to 128 KiB pass at memory speed after an idle gap): fit on the larger ones.
    big = [row for row in rows if row[0][1] >= 262144]
    rows = big if len(big) >= 4 else rows
    alpha, beta = _fit(rows)
    errs = [abs((s * alpha + v * beta) - t) / t for (s, v), t in rows]
    cut = max(0.25, 3 * sorted(errs)[len(errs) // 2])
    kept = [row for row, e in zip(rows, errs) if e <= cut]
    if len(kept) >= 4 and len(kept) < len(rows):
        alpha, beta = _fit(kept)
    errs = sorted(abs((s * alpha + v * beta) - t) / t for (s, v), t in kept)
    return {"alpha_s": alpha, "beta_s_per_byte": beta,
            "rate_mbit": 8 / beta / 1e6 if beta > 0 else float("inf"),
            "points": len(kept), "dropped": len(rows) - len(kept),
            "median_abs_err": errs[len(errs) // 2], "max_abs_err": errs[-1]}


# ---------------------------------------------------------------- iteration model


def buckets(n):
    """Bucket count of sparsetrain's default plan (1 MB first bucket, then 25 MB)."""
    mb = 4.0 * n / 2 ** 20
    return 1 + max(0, math.ceil((mb - FIRST_BUCKET_MB) / BUCKET_CAP_MB - 1e-9))


def exchange_time(sparsifier, P, n, stats, alpha, beta, topology="switched"):
    """Seconds of communication per iteration. stats (per iteration, summed over buckets,
    at P workers): k = user count, local = this rank's selected count, union = aggregated
    count, maxk = largest per-rank count, wire = bytes a rank puts on the wire."""
    b = buckets(n)
    pat = pattern(sparsifier)
    t = lambda op, nbytes, maxbytes=None: coll_time(op, P, nbytes, alpha, beta, maxbytes, topology)
    ring = 2 * (P - 1) * alpha  # latency of one more ring allreduce / padded allgather
    # A collective per bucket: bytes are summed over buckets, latency paid b times.
    if pat == "dense":
        return t("allreduce", 4.0 * n) + (b - 1) * ring
    counts = b * t("allgatherv", 8.0 * P)  # every exchange ends or starts with the counts
    if pat == "union-allreduce":
        # counts + indices padded to max_i k_i (coll "padded"), then x at the union.
        return (t("padded", None, 4.0 * stats["maxk"]) + t("allreduce", 4.0 * stats["union"])
                + 2 * (b - 1) * ring)
    if pat == "allgather-sum":
        # counts, then two allgatherv per bucket (indices + values, or word counts + packed
        # words) carrying every rank's wire bytes.
        return counts + t("allgatherv", P * stats["wire"]) + (2 * b - 1) * (P - 1) * alpha
    if pat == "shared-indices":
        return t("allreduce", 4.0 * stats["k"]) + (b - 1) * ring + counts
    if pat == "leader-indices":
        # broadcast of the leader's count and indices, allreduce there, counts.
        return (t("bcast", 8.0) * b + t("bcast", 4.0 * stats["k"]) + t("allreduce", 4.0 * stats["k"])
                + (b - 1) * (ring + coll("bcast", P, 0)[0] * alpha) + counts)
    if pat == "low-rank":
        # two allreduces per bucket (PowerSGD's P, then Q and the dense tensors); wire =
        # the floats of both messages.
        return t("allreduce", stats["wire"]) + (2 * b - 1) * ring
    raise ValueError(f"{sparsifier}: no cost formula for exchange pattern '{pat}'")


def two_level_exchange_time(sparsifier, nodes, per_node, n, d, inter, intra):
    """Seconds of communication per iteration of the two-level exchange (--hierarchy,
    docs/ALGORITHMS.md) on `nodes` nodes of `per_node` ranks, for a model of n parameters at
    density d. inter, intra: (alpha s, beta s/byte) of the link between nodes and inside a
    node. Inside a node: a ring reduce-scatter and a ring allgather of the bucket (each
    (L-1) alpha + (L-1)/L 4n beta). Across nodes: the method's flat exchange among the
    `nodes` ranks of one local rank, on a slice of n / L elements; the node's L groups run
    at once through the node's one network link, so their bytes share it (beta L). With one
    node the method runs flat over the node's ranks, as the implementation does."""
    L = per_node
    if nodes == 1:  # nothing crosses a slow link: the method runs flat inside the node
        return flat_exchange_time(sparsifier, L, n, d, intra)
    a_i, b_i = intra
    a_x, b_x = inter
    inside = 2 * ((L - 1) * a_i + (L - 1) / L * 4.0 * n * b_i) if L > 1 else 0.0
    slice_n = n / L
    stats = {} if sparsifier == "none" else ideal_stats(sparsifier, nodes, slice_n, d)
    return inside + exchange_time(sparsifier, nodes, slice_n, stats, a_x, b_x * L)


def flat_exchange_time(sparsifier, P, n, d, inter):
    """The flat exchange over P ranks with every message crossing the network (ring
    collectives pass each message over every link, so a node's link carries what one
    rank's would: the switched model)."""
    stats = {} if sparsifier == "none" else ideal_stats(sparsifier, P, n, d)
    return exchange_time(sparsifier, P, n, stats, inter[0], inter[1])


def project_two_level(methods, models, per_node, nodes_list, d, links, intra):
    """Rows of flat vs two-level communication ms at nodes x per_node ranks."""
    rows = []
    for model in models:
        n = PARAMS[model]
        for link, inter in links.items():
            for sp in methods:
                for N in nodes_list:
                    P = N * per_node
                    # One node's flat exchange stays on the fast link inside it.
                    flat_link = intra if N == 1 else inter
                    rows.append({"model": model, "link": link, "sparsifier": sp, "nodes": N,
                                 "per_node": per_node, "P": P,
                                 "flat_ms": 1e3 * flat_exchange_time(sp, P, n, d, flat_link),
                                 "two_level_ms": 1e3 * two_level_exchange_time(
                                     sp, N, per_node, n, d, inter, intra)})
    return rows


def two_level_main(a):
    """--two-level L: the projection table of flat vs two-level communication."""
    links = {}
    for spec in a.link:
        try:
            name, alpha_us, mbit = spec.split(":")
            links[name] = (float(alpha_us) * 1e-6, 8.0 / (float(mbit) * 1e6))
        except ValueError:
            raise ValueError(f"--link '{spec}' is not NAME:ALPHA_US:MBIT (e.g. 10gbit:5:10000)")
    try:
        alpha_us, gbyte = a.intra.split(":")
        intra = (float(alpha_us) * 1e-6, 1.0 / (float(gbyte) * 1e9))
    except ValueError:
        raise ValueError(f"--intra '{a.intra}' is not ALPHA_US:GBYTE_PER_S (e.g. 5:50)")
    nodes = [int(x) for x in a.nodes.split(",")]
    methods = a.methods.split(",")
    rows = project_two_level(methods, ["resnet50", "lstm"], a.two_level, nodes, a.density, links, intra)
    lines = [f"## Two-level projection: {a.two_level} ranks per node, communication ms per iteration",
             "", f"Inside a node: alpha {float(alpha_us):g} us, {float(gbyte):g} GB/s; density "
             f"{a.density:g}; flat / two-level.", ""]
    for model in ("resnet50", "lstm"):
        for link in links:
            lines += [f"### {model}, {link} between nodes", "",
                      "| method | " + " | ".join(f"{N}x{a.two_level}" for N in nodes) + " |",
                      "|---|" + "---|" * len(nodes)]
            for sp in methods:
                cells = [r for r in rows if (r["model"], r["link"], r["sparsifier"]) == (model, link, sp)]
                name = "dense allreduce" if sp == "none" else sp
                lines.append(f"| {name} | " + " | ".join(
                    f"{r['flat_ms']:.1f} / {r['two_level_ms']:.1f}" for r in cells) + " |")
            lines.append("")
    print("\n".join(lines))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "two_level.json"), "w") as f:
            json.dump(rows, f, indent=1)


def stats_from_row(r, n):
    """Per-iteration exchange sizes of a measured run (summary.json row)."""
    if r["sparsifier"] == "none":
        return {}
    k = val(r, "sp_k") or r["density"] * n
    local = val(r, "sp_local") or k
    union = val(r, "sp_global") or local
    wire = val(r, "sp_bytes") or 8 * local
    b = buckets(n)
    if pattern(r["sparsifier"]) == "union-allreduce":
        # bytes = 8 + 4 maxk + 4 union per bucket (sparsify_hook.cpp).
        maxk = max(local, (wire - 8 * b - 4 * union) / 4)
    else:
        maxk = local
    return {"k": k, "local": local, "union": union, "maxk": maxk, "wire": wire}


def ideal_stats(sparsifier, P, n, d):
    """Exchange sizes when no multi-rank run measured them (ResNet-50 runs on one process):
    every rank selects k = d n (MiCRO/ExDyna: d n / P each, no padding), Top-k style unions
    do not overlap (an upper bound), allgather payloads are 8 bytes per selected value."""
    k = d * n
    local = k / P if partitioned(sparsifier) else k
    union = k if partitioned(sparsifier) or pattern(sparsifier) != "union-allreduce" else min(n, P * k)
    return {"k": k, "local": local, "union": union, "maxk": local, "wire": 8 * local}


def project_stats(sparsifier, stats, P_meas, P, n, d):
    """Exchange sizes at P workers from sizes measured at P_meas: MiCRO/ExDyna hold the
    global density (union = d n, split over P ranks, with the measured padding); Top-k style
    unions grow with P (overlap ratio held at the measured value, capped at n); per-rank
    allgather payloads stay per-rank."""
    k = d * n
    if sparsifier == "none":
        return {}
    s = dict(stats)
    scale = k / stats["k"] if stats.get("k") else 1.0
    for key in ("k", "local", "union", "maxk", "wire"):
        s[key] = stats[key] * scale
    if partitioned(sparsifier):
        pad = stats["maxk"] * P_meas / max(stats["union"], 1.0)
        s["union"] = stats["union"] * scale
        s["maxk"] = pad * s["union"] / P
        s["local"] = s["union"] / P
    elif pattern(sparsifier) == "union-allreduce":
        overlap = stats["union"] / max(P_meas * stats["local"], 1.0)
        s["union"] = min(n, overlap * P * s["local"])
    return s


def val(r, key):
    """A summary field as a number; missing or NaN (dense runs have no sp_*) is 0."""
    v = r.get(key)
    return v if isinstance(v, (int, float)) and v == v else 0.0


def decode_at(sparsifier, decode_s, P_meas, P):
    """Receive-side time at P workers from the time measured at P_meas: an allgather
    pattern unpacks and sums one payload per rank (grows as P); the union and shared-index
    patterns scatter one aggregated vector of fixed size (held)."""
    if pattern(sparsifier) == "allgather-sum" and P_meas > 0:
        return decode_s * P / P_meas
    return decode_s


def base_rank(r):
    """Which measured run a projection starts from (smaller is better): the fewest ranks,
    then the actual density closest to the user-set one (a threshold rule still far from
    its target, e.g. MiCRO with the paper's 0.5% steps after 30 iterations, would project
    a traffic the method does not have in steady state)."""
    d, got = r.get("density"), val(r, "sp_density")
    miss = abs(math.log(got / d)) if d and got > 0 and r["sparsifier"] != "none" else 0.0
    return (r["ranks"], miss)


def compute_ms(r):
    """A run's per-iteration compute: data + forward + backward + optimiser medians."""
    return sum(val(r, k) for k in ("data_ms", "fwd_ms", "bwd_ms", "opt_ms"))


def common_compute(rows):
    """{model: (compute ms, runs, ranks)}: the median compute (data + forward + backward +
    optimiser) over the model's runs with the fewest ranks. Compute does not depend on the
    sparsifier, but a single run's median does carry the noise of ranks sharing cores
    (+-20% here); one figure per model keeps that noise out of the comparison of methods."""
    out = {}
    for model in {r["model"] for r in rows}:
        runs = [r for r in rows if r["model"] == model]
        fewest = min(r["ranks"] for r in runs)
        cs = [compute_ms(r) for r in runs if r["ranks"] == fewest]
        out[model] = (statistics.median(cs), len(cs), fewest)
    return out


def predict_measured(row, fit, n):
    """Model iteration time of a measured run: its own compute, selection and decode
    medians plus the modelled exchange on the shared emulated link (no overlap credited)."""
    P = row["ranks"]
    compute = compute_ms(row) / 1e3
    select = val(row, "sp_select_ms") / 1e3
    decode = val(row, "sp_decode_ms") / 1e3
    comm = exchange_time(row["sparsifier"], P, n, stats_from_row(row, n), fit["alpha_s"],
                         fit["beta_s_per_byte"], "shared")
    return compute + select + decode + comm, compute, select, decode, comm


def measured_comm_ms(row):
    """A run's measured communication per step, for runs that exchange after backward
    (--no-overlap): the whole wait for a dense run; the sparsifier's exchange less its
    decoding (the collectives and their packing) otherwise."""
    if row["sparsifier"] == "none":
        return val(row, "comm_ms")
    return val(row, "sp_exchange_ms") - val(row, "sp_decode_ms")


def comm_check(rows, fits):
    """Modelled vs measured communication per step for every run with a link fit:
    (lines of a markdown table and summary, records)."""
    lines = ["", "## Check: modelled vs measured communication per step", "",
             "| run | pattern | P | link | measured comm ms | modelled comm ms | error |",
             "|---|---|---|---|---|---|---|"]
    out = []
    for r in sorted(rows, key=lambda r: (pattern(r["sparsifier"]), r["sparsifier"], r["ranks"])):
        n = PARAMS.get(r["model"])
        measured = measured_comm_ms(r)
        if not n or r["ranks"] < 2 or measured <= 0:
            continue
        f = fits[r["bandwidth"]]
        model = 1e3 * exchange_time(r["sparsifier"], r["ranks"], n, stats_from_row(r, n),
                                    f["alpha_s"], f["beta_s_per_byte"], "shared")
        err = model / measured - 1
        out.append({"id": r["id"], "pattern": pattern(r["sparsifier"]), "ranks": r["ranks"],
                    "measured_ms": measured, "model_ms": model, "error": err})
        lines.append(f"| {r['id']} | {out[-1]['pattern']} | {r['ranks']} | {r['bandwidth']} | "
                     f"{measured:.2f} | {model:.2f} | {100 * err:+.0f}% |")
    if out:
        lines += ["", "| pattern | runs | median error | range |", "|---|---|---|---|"]
        for pat in sorted({c["pattern"] for c in out}):
            errs = sorted(c["error"] for c in out if c["pattern"] == pat)
            lines.append(f"| {pat} | {len(errs)} | {100 * statistics.median(errs):+.0f}% | "
                         f"{100 * errs[0]:+.0f}% to {100 * errs[-1]:+.0f}% |")
    return lines, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--comm", nargs="+", help="comm_bench JSON-line files")
    ap.add_argument("--summary", help="summary.json of scripts/reproduce.sh")
    ap.add_argument("--sparsifiers-json", required=True,
                    help="`sparsetrain sparsifiers --json` output (reproduce.sh saves it as "
                         "sparsifiers.json in its output folder)")
    ap.add_argument("--out", help="folder for scaling.md / scaling.json / figures")
    ap.add_argument("--workers", default="8,16,32,64,128,256")
    two = ap.add_argument_group("two-level projection (--two-level L; needs no --comm/--summary)")
    two.add_argument("--two-level", type=int, metavar="L", help="ranks per node")
    two.add_argument("--nodes", default="1,2,4,8,16,32", help="node counts")
    two.add_argument("--link", action="append", default=[], metavar="NAME:ALPHA_US:MBIT",
                     help="a link between nodes (repeatable), e.g. 10gbit:5:10000")
    two.add_argument("--intra", default="5:50", metavar="ALPHA_US:GBYTE_PER_S",
                     help="the link inside a node (default NVLink/PCIe class, 5 us, 50 GB/s)")
    two.add_argument("--methods", default="none,topk,micro", help="sparsifiers to project")
    two.add_argument("--density", type=float, default=0.01)
    a = ap.parse_args()
    load_sparsifiers(a.sparsifiers_json)
    if a.two_level:
        if not a.link:
            raise ValueError("--two-level needs at least one --link NAME:ALPHA_US:MBIT")
        return two_level_main(a)
    if not (a.comm and a.summary and a.out):
        raise ValueError("--comm, --summary and --out are needed (or --two-level)")
    recs = load_comm(a.comm)
    fits = {}
    for link in sorted({r["link"] for r in recs}):
        fits[link] = fit_link([r for r in recs if r["link"] == link])
    all_rows = [json.loads(l) for l in open(a.summary) if l.strip()]
    all_rows = [r for r in all_rows if r.get("iter_ms") == r.get("iter_ms")]
    rows = [r for r in all_rows if r.get("bandwidth") in fits]

    lines = ["## Link fits (comm_bench on the emulated link, shared-medium model)", "",
             "| link | alpha (us) | beta (ns/byte) | effective Mbit/s | points (dropped) | median abs err | max abs err |",
             "|---|---|---|---|---|---|---|"]
    for link, f in fits.items():
        lines.append(f"| {link} | {f['alpha_s'] * 1e6:.1f} | {f['beta_s_per_byte'] * 1e9:.3f} | "
                     f"{f['rate_mbit']:.0f} | {f['points']} ({f['dropped']}) | {100 * f['median_abs_err']:.1f}% | "
                     f"{100 * f['max_abs_err']:.1f}% |")
    lines += ["", "## Check: model vs measured iteration", "",
              "| run | P | link | measured ms | model ms | compute ms | select ms | decode ms | modelled comm ms | error |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    checks = []
    for r in rows:
        n = PARAMS.get(r["model"])
        if not n or r["ranks"] < 2:
            continue
        pred, comp, sel, dec, comm = predict_measured(r, fits[r["bandwidth"]], n)
        err = pred / (r["iter_ms"] / 1e3) - 1
        checks.append({"id": r["id"], "ranks": r["ranks"], "link": r["bandwidth"],
                       "measured_ms": r["iter_ms"], "model_ms": 1e3 * pred, "error": err})
        lines.append(f"| {r['id']} | {r['ranks']} | {r['bandwidth']} | {r['iter_ms']:.1f} | "
                     f"{1e3 * pred:.1f} | {1e3 * comp:.1f} | {1e3 * sel:.2f} | {1e3 * dec:.1f} | {1e3 * comm:.1f} | "
                     f"{100 * err:+.1f}% |")
    if checks:
        within = sum(abs(c["error"]) <= 0.25 for c in checks)
        lines += ["", f"{within} of {len(checks)} runs within 25%; median |error| "
                      f"{100 * sorted(abs(c['error']) for c in checks)[len(checks) // 2]:.1f}%, "
                      f"max {100 * max(abs(c['error']) for c in checks):.1f}%"]

    comm_lines, comm_checks = comm_check(rows, fits)
    lines += comm_lines

    # Projections: selection and decode from each method's run with the fewest ranks,
    # compute common to all methods of a model (common_compute); a switched network at
    # the link's fitted rate.
    workers = [int(w) for w in a.workers.split(",")]
    proj = []
    shared = common_compute(all_rows)
    base = {}
    for r in all_rows:
        key = (r["model"], r["sparsifier"], r.get("density"))
        if r["model"] in ("lstm", "resnet50") and (key not in base or base_rank(r) < base_rank(base[key])):
            base[key] = r
    for (model, sp, d), r in sorted(base.items(), key=lambda kv: str(kv[0])):
        n = PARAMS[model]
        Pm = max(r["ranks"], 1)
        stats = stats_from_row(r, n)
        for link, f in fits.items():
            for P in workers:
                compute = shared[model][0] / 1e3
                select = val(r, "sp_select_ms") / 1e3
                if partitioned(sp):
                    select *= Pm / P
                decode = decode_at(sp, val(r, "sp_decode_ms") / 1e3, Pm, P)
                if sp == "none":
                    s = {}
                elif r["ranks"] < 2:
                    s = ideal_stats(sp, P, n, d)
                else:
                    s = project_stats(sp, stats, Pm, P, n, d)
                comm = exchange_time(sp, P, n, s, f["alpha_s"], f["beta_s_per_byte"], "switched")
                proj.append({"model": model, "sparsifier": sp, "density": d, "link": link, "P": P,
                             "compute_ms": 1e3 * compute, "select_ms": 1e3 * select,
                             "decode_ms": 1e3 * decode, "comm_ms": 1e3 * comm,
                             "iter_ms": 1e3 * (compute + select + decode + comm)})
    if proj:
        lines += ["", "## Projection (switched network at the fitted link rate; iteration ms)", "",
                  "Compute per worker (every method of a model): " + "; ".join(
                      f"{m} {c:.0f} ms (median of {k} runs on {p} rank{'s' if p > 1 else ''})"
                      for m, (c, k, p) in sorted(shared.items())) + ".", ""]
        cols = sorted({(p["model"], p["link"]) for p in proj})
        for model, link in cols:
            sub = [p for p in proj if p["model"] == model and p["link"] == link]
            lines += [f"### {model}, {link}", "", "| sparsifier | " + " | ".join(f"P={P}" for P in workers) + " |",
                      "|---|" + "---|" * len(workers)]
            for sp in sorted({(p["sparsifier"], p["density"]) for p in sub}, key=str):
                vals = {p["P"]: p["iter_ms"] for p in sub if (p["sparsifier"], p["density"]) == sp}
                name = "dense allreduce" if sp[0] == "none" else f"{sp[0]} d={sp[1]:g}"
                lines.append(f"| {name} | " + " | ".join(f"{vals[P]:.0f}" for P in workers) + " |")
            lines.append("")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "scaling.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "scaling.json"), "w") as f:
        json.dump({"fits": fits, "checks": checks, "comm_checks": comm_checks,
                   "projections": proj}, f, indent=1)
    if proj:
        draw(proj, checks, workers, os.path.join(a.out, "figures", "scaling.png"))
    print("\n".join(lines))


def draw(proj, checks, workers, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = sorted({(p["model"], p["link"]) for p in proj})
    fig, axes = plt.subplots(1, len(cols) + 1, figsize=(5.5 * (len(cols) + 1), 4.6), squeeze=False)
    for ax, (model, link) in zip(axes[0], cols):
        sub = [p for p in proj if p["model"] == model and p["link"] == link]
        for i, sp in enumerate(sorted({(p["sparsifier"], p["density"]) for p in sub}, key=str)):
            pts = sorted((p["P"], p["iter_ms"]) for p in sub if (p["sparsifier"], p["density"]) == sp)
            # More lines than the 10 default colours: vary marker and dash with the colour.
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="osD^v"[(i // 10) % 5],
                    linestyle=["-", "--", ":"][(i // 10) % 3],
                    label="dense" if sp[0] == "none" else f"{sp[0]} {sp[1]:g}")
        ax.set(xscale="log", yscale="log", xlabel="workers P", ylabel="modelled iteration ms",
               title=f"{model}, {link} per worker")
        ax.set_xticks(workers, [str(w) for w in workers])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax = axes[0][-1]
    if checks:
        ax.scatter([c["measured_ms"] for c in checks], [c["model_ms"] for c in checks], s=14)
        lo = min(min(c["measured_ms"], c["model_ms"]) for c in checks)
        hi = max(max(c["measured_ms"], c["model_ms"]) for c in checks)
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=1)
        ax.plot([lo, hi], [1.25 * lo, 1.25 * hi], color="gray", linestyle="--", linewidth=1)
        ax.plot([lo, hi], [0.75 * lo, 0.75 * hi], color="gray", linestyle="--", linewidth=1)
        ax.set(xscale="log", yscale="log")
    ax.set(xlabel="measured iteration ms", ylabel="model ms",
           title="model check (dashed: +-25%)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    try:
        main()
    except ValueError as e:  # an unknown method or pattern: one line, no traceback
        sys.exit(f"scaling_model: {e}")
