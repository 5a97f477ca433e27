#!/usr/bin/python3
"""The experiment runner behind scripts/reproduce.sh. Reads a grid config, runs
every configuration that has not finished yet (one folder per run), then writes the
summary tables and the figures. See docs/REPRODUCE.md for the config format.

  scripts/reproduce_lib.py [--quick] [--config FILE] [--out DIR] [--build DIR] [--dry-run]
                           [--only SUBSTRING] [--no-report]
  scripts/reproduce_lib.py --task NAME [--epochs E] [--np N] [--max-iters K] [--out DIR]
                           [--build DIR] [--dry-run]
"""
import argparse
import csv
import datetime
import itertools
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable or "/usr/bin/python3"
# `sparsetrain sparsifiers --json`, saved in the output folder for scripts/scaling_model.py.
SPARSIFIERS_JSON = "sparsifiers.json"

# Keys a line may use, with their meaning (the error for an unknown key lists them).
TRAIN_KEYS = {
    "name": "grid name (folder under --out)",
    "model": "--arch value(s), comma-separated",
    "dataset": "--dataset (default: the model's own; synthetic for resnet/vgg if not set)",
    "sparsifiers": "--sparsifier values; none = dense allreduce baseline",
    "densities": "--density values (ignored for none)",
    "ranks": "process counts (1 = no mpirun)",
    "bandwidths": "none (no emulation) or a tc rate per run: 100mbit, 1gbit, 10gbit",
    "epochs": "--epochs",
    "max_iters": "--max-iters (short timing runs)",
    "batch": "-b (per rank)",
    "global_batch": "fixed global batch: -b = global_batch / P per run (P must divide it)",
    "lr": "--lr",
    "warmup": "iterations left out of the timing medians (default 5)",
    "threads": "--threads per rank (default 1 under mpirun, 2 alone)",
    "args": "extra sparsetrain train flags, quoted",
    "sp": "sparsifier parameters as key=value pairs, quoted: sp=\"up=1.1 down=0.9\"",
    "tag": "label appended to run names (a variant of the same sparsifiers, e.g. other --sp)",
}
COMM_KEYS = {
    "name": "grid name",
    "ranks": "process counts (>= 2)",
    "bandwidths": "none or tc rates",
    "ops": "comm_bench --ops (default allreduce,allgatherv,padded)",
    "max_bytes": "largest message per rank in bytes (default 4194304)",
    "min_bytes": "smallest message (default 1024)",
    "budget": "seconds of repetitions per size (default 2)",
}
RATE_RE = re.compile(r"^(none|\d+(\.\d+)?(bit|kbit|mbit|gbit|tbit))$")
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
# Under the emulated link every byte must cross the rate-limited loopback: TCP only.
MPI_TCP = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", "--mca",
           "oob_tcp_if_include", "lo"]


class ConfigError(Exception):
    pass


def split_list(v):
    return [x for x in v.split(",") if x]


def parse_config(path, sparsifier_names=None, arch_names=None):
    """Returns a list of line dicts: {'kind', 'line', key: value...}. Raises ConfigError
    naming the file and line for anything it does not understand."""
    if not os.path.exists(path):
        raise ConfigError(f"{path}: no such config file")
    lines = []
    names = set()
    try:
        with open(path, encoding="utf-8") as f:
            text_lines = f.readlines()
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a text config (byte {e.start} is not UTF-8)")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it ({e.strerror})")
    if any("\0" in raw for raw in text_lines):
        raise ConfigError(f"{path}: not a text config (it holds NUL bytes)")
    for no, raw in enumerate(text_lines, 1):
        text = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not text:
            continue
        where = f"{path}:{no}"
        try:
            tokens = shlex.split(text)
        except ValueError as e:
            raise ConfigError(f"{where}: {e}")
        kind = "train"
        if tokens and "=" not in tokens[0]:
            kind = tokens.pop(0)
            if kind not in ("train", "comm"):
                raise ConfigError(f"{where}: unknown line kind '{kind}' (train or comm)")
        keys = TRAIN_KEYS if kind == "train" else COMM_KEYS
        entry = {"kind": kind, "line": where}
        for tok in tokens:
            key, eq, value = tok.partition("=")
            if not eq:
                raise ConfigError(f"{where}: '{tok}' is not key=value")
            if key not in keys:
                raise ConfigError(f"{where}: unknown key '{key}' for a {kind} line (known: "
                                  f"{', '.join(keys)})")
            if key in entry:
                raise ConfigError(f"{where}: key '{key}' given twice")
            entry[key] = value
        _check_entry(entry, where, sparsifier_names, arch_names)
        if entry["name"] in names:
            raise ConfigError(f"{where}: grid name '{entry['name']}' used twice")
        names.add(entry["name"])
        lines.append(entry)
    if not lines:
        raise ConfigError(f"{path}: no grid lines")
    return lines


def _check_entry(e, where, sparsifier_names, arch_names):
    need = ["name", "ranks", "bandwidths"] + (["model", "sparsifiers"] if e["kind"] == "train" else [])
    for k in need:
        if k not in e:
            raise ConfigError(f"{where}: missing key '{k}'")
    for key in ("name", "tag"):
        if key in e and not re.match(r"^[A-Za-z0-9_.-]+$", e[key]):
            raise ConfigError(f"{where}: {key} '{e[key]}' may only use letters, digits, _ . -")

    def ints(key, lo=1):
        try:
            vals = [int(x) for x in split_list(e[key])]
        except ValueError:
            raise ConfigError(f"{where}: {key}={e[key]}: expected integers")
        if not vals or min(vals) < lo:
            raise ConfigError(f"{where}: {key}={e[key]}: expected integers >= {lo}")
        return vals

    e["ranks"] = ints("ranks", 2 if e["kind"] == "comm" else 1)
    e["bandwidths"] = split_list(e["bandwidths"])
    for bw in e["bandwidths"]:
        if not RATE_RE.match(bw):
            raise ConfigError(f"{where}: bandwidth '{bw}' is not none or a tc rate like 100mbit")
    for key in ("epochs", "max_iters", "batch", "global_batch", "warmup", "threads", "max_bytes",
                "min_bytes"):
        if key in e:
            e[key] = ints(key, 0 if key == "warmup" else 1)[0]
    for key in ("lr", "budget"):
        if key in e:
            try:
                e[key] = float(e[key])
            except ValueError:
                raise ConfigError(f"{where}: {key}={e[key]}: expected a number")
    if e["kind"] == "comm":
        return
    e["model"] = split_list(e["model"])
    if arch_names:
        for m in e["model"]:
            if m not in arch_names:
                raise ConfigError(f"{where}: unknown model '{m}' (sparsetrain knows: "
                                  f"{', '.join(sorted(arch_names))})")
    e["sparsifiers"] = split_list(e["sparsifiers"])
    if sparsifier_names is not None:
        for s in e["sparsifiers"]:
            if s != "none" and s not in sparsifier_names:
                raise ConfigError(f"{where}: unknown sparsifier '{s}' (none or one of: "
                                  f"{', '.join(sparsifier_names)})")
    try:
        e["densities"] = [float(x) for x in split_list(e.get("densities", "0.01"))]
    except ValueError:
        raise ConfigError(f"{where}: densities={e['densities']}: expected numbers")
    if any(not 0 < d <= 1 for d in e["densities"]):
        raise ConfigError(f"{where}: densities must lie in (0, 1]")
    if "epochs" not in e and "max_iters" not in e:
        raise ConfigError(f"{where}: give epochs= or max_iters=")
    if "global_batch" in e:
        if "batch" in e:
            raise ConfigError(f"{where}: give batch= (per rank) or global_batch=, not both")
        bad = [p for p in e["ranks"] if e["global_batch"] % p]
        if bad:
            raise ConfigError(f"{where}: global_batch={e['global_batch']} is not divisible by "
                              f"ranks {','.join(map(str, bad))}")
    if 1 in e["ranks"] and any(bw != "none" for bw in e["bandwidths"]):
        raise ConfigError(f"{where}: ranks=1 has no network; use bandwidths=none for it")
    try:
        shlex.split(e.get("args", ""))
    except ValueError as err:
        raise ConfigError(f"{where}: args: {err}")
    for pair in e.get("sp", "").split():
        k, eq, v = pair.partition("=")
        if not (k and eq and v):
            raise ConfigError(f"{where}: sp: expected key=value pairs, got '{pair}'")


def expand(entries):
    """One dict per run: folder name plus everything needed to build its command."""
    runs = []
    for e in entries:
        if e["kind"] == "comm":
            for p, bw in itertools.product(e["ranks"], e["bandwidths"]):
                runs.append({"kind": "comm", "grid": e["name"], "ranks": p, "bandwidth": bw,
                             "id": f"{e['name']}/comm_np{p}_{bw}", "entry": e})
            continue
        for model, p, bw, sp in itertools.product(e["model"], e["ranks"], e["bandwidths"],
                                                  e["sparsifiers"]):
            for d in ([None] if sp == "none" else e["densities"]):
                tag = f"{model}_np{p}_{bw}_{sp}" + ("" if d is None else f"_d{d:g}")
                if e.get("tag"):
                    tag += "_" + e["tag"]
                runs.append({"kind": "train", "grid": e["name"], "model": model, "ranks": p,
                             "bandwidth": bw, "sparsifier": sp, "density": d,
                             "tag": e.get("tag", ""),
                             "id": f"{e['name']}/{tag}", "entry": e})
    return runs


def sp_flags(pairs):
    """--sp flags as the CLI takes them: one `--sp key=value` per pair."""
    return [f for pair in pairs for f in ("--sp", pair)]


def command(run, build, out_dir, comm_bench=None):
    e = run["entry"]
    p, bw = run["ranks"], run["bandwidth"]
    prefix = []
    if bw != "none":
        prefix = [os.path.join(HERE, "netns_run.sh"), bw, "--"]
    launcher = []
    if p > 1:
        launcher = MPI + ["-np", str(p)] + (MPI_TCP if bw != "none" else [])
    if run["kind"] == "comm":
        cmd = [comm_bench or os.path.join(build, "bench", "comm_bench"),
               "--ops", e.get("ops", "allreduce,allgatherv,padded"),
               "--min-bytes", str(e.get("min_bytes", 1024)),
               "--max-bytes", str(e.get("max_bytes", 4 << 20)),
               "--budget", str(e.get("budget", 2.0))]
        return prefix + launcher + cmd
    threads = e.get("threads", 1 if p > 1 else 2)
    cmd = [os.path.join(build, "apps", "sparsetrain"), "train", "--arch", run["model"],
           "--threads", str(threads), "--workers", "1", "--out", out_dir]
    extra = shlex.split(e.get("args", ""))
    if "--log-every" not in extra:  # a line's own --log-every (full.conf's acc_*) wins
        cmd += ["--log-every", "10"]
    if "dataset" in e:
        cmd += ["--dataset", e["dataset"]]
    for key, flag in (("epochs", "--epochs"), ("max_iters", "--max-iters"), ("batch", "-b"),
                      ("lr", "--lr")):
        if key in e:
            cmd += [flag, str(e[key])]
    if "global_batch" in e:
        cmd += ["-b", str(e["global_batch"] // p)]
    if run["sparsifier"] != "none":
        cmd += ["--sparsifier", run["sparsifier"], "--density", f"{run['density']:g}"]
    if run["sparsifier"] != "none":
        cmd += sp_flags(e.get("sp", "").split())
    cmd += extra
    return prefix + launcher + cmd


# ---------------------------------------------------------------- running


def finished(folder):
    marker = os.path.join(folder, "run.json")
    if not os.path.exists(marker):
        return False
    try:
        return json.load(open(marker)).get("rc") == 0
    except (OSError, ValueError):
        return False


def run_one(run, cmd, folder, log_path):
    """Runs cmd in its own process group (so an interrupt ends mpirun, the ranks and
    netns_run.sh, whose trap removes the namespace); writes run.json only on success."""
    start = time.time()
    with open(log_path, "w") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        log.flush()
        stdout = open(os.path.join(folder, "comm.jsonl"), "w") if run["kind"] == "comm" else log
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=log, cwd=ROOT, start_new_session=True)
        try:
            rc = proc.wait()
        except BaseException:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            raise
        finally:
            if stdout is not log:
                stdout.close()
    wall = time.time() - start
    if rc == 0:
        info = {"rc": 0, "command": cmd, "wall_s": round(wall, 2),
                "start": datetime.datetime.utcfromtimestamp(start).isoformat() + "Z",
                "id": run["id"]}
        with open(os.path.join(folder, "run.json.tmp"), "w") as f:
            json.dump(info, f, indent=1)
        os.replace(os.path.join(folder, "run.json.tmp"), os.path.join(folder, "run.json"))
    return rc, wall


def sparsetrain_names(build):
    """Sparsifier and architecture names the binary knows (for config checking), and its
    `sparsifiers --json` text (saved for the scaling model)."""
    exe = os.path.join(build, "apps", "sparsetrain")
    if not os.path.exists(exe):
        return None, None, None
    res = subprocess.run([exe, "sparsifiers", "--json"], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"reproduce: `{exe} sparsifiers --json` failed ({res.stderr.strip()[-200:]}); "
                 "rebuild sparsetrain")
    listing = res.stdout
    sps = [m["name"] for m in json.loads(listing)["sparsifiers"]]
    helptext = subprocess.run([exe, "train", "--help"], capture_output=True, text=True).stdout
    m = re.search(r"model architecture: ([^\n]*)", helptext)
    archs = None
    if m:
        archs = {a.strip().split(" ")[0] for a in m.group(1).split(",") if a.strip()}
    return sps, archs, listing


def check_flags(runs, build, out):
    """Every train run's flags and --sp keys through `sparsetrain train ... --check-flags`
    (the checks a run makes at its start), once per distinct command, before anything
    runs: a bad line fails here, not in the middle of the grid. Returns error lines."""
    exe = os.path.join(build, "apps", "sparsetrain")
    errors, seen = [], {}
    for r in runs:
        if r["kind"] != "train":
            continue
        cmd = command(r, build, os.path.join(out, r["id"]))
        cmd = cmd[cmd.index(exe):]
        key = tuple(c for c in cmd if c != cmd[cmd.index("--out") + 1])
        if key not in seen:
            res = subprocess.run(cmd + ["--check-flags"], capture_output=True, text=True)
            lines = (res.stderr.strip() or res.stdout.strip()).splitlines()
            first = lines[0].removeprefix("sparsetrain: error: ") if lines else f"exit {res.returncode}"
            seen[key] = None if res.returncode == 0 else first
        if seen[key]:
            errors.append(f"{r['entry']['line']}: {r['id']}: {seen[key]}")
    return errors


# ---------------------------------------------------------------- summarising


def read_csv(path):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def fnum(r, key, default=float("nan")):
    try:
        return float(r[key])
    except (KeyError, TypeError, ValueError):
        return default


def med(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def summarize_train(run, folder):
    """Medians over the iterations after warm-up: per-iteration wall time (differences of
    wall_s, so data loading and logging count), the phases, selection / exchange time,
    actual density and padding; final loss, accuracy or perplexity."""
    its = read_csv(os.path.join(folder, "iterations.csv"))
    eps = read_csv(os.path.join(folder, "epochs.csv"))
    warm = run["entry"].get("warmup", 5)
    row = {k: run[k] for k in ("id", "grid", "model", "ranks", "bandwidth", "sparsifier", "density",
                               "tag")}
    row["iterations"] = len(its)
    walls = [fnum(r, "wall_s") for r in its]
    iter_s = [b - a for a, b in zip(walls, walls[1:])]
    timed = its[warm:] if len(its) > warm + 2 else its[len(its) // 2:]
    iter_s = iter_s[max(warm - 1, 0):] if len(iter_s) > warm + 1 else iter_s[len(iter_s) // 2:]
    row["iter_ms"] = 1e3 * med(iter_s)
    for key in ("data_ms", "fwd_ms", "bwd_ms", "comm_ms", "opt_ms", "sp_select_ms",
                "sp_exchange_ms", "sp_decode_ms", "sp_density", "sp_padding", "sp_bytes", "sp_local", "sp_global",
                "sp_k"):
        row[key] = med([fnum(r, key) for r in timed])
    row["loss"] = fnum(its[-1], "loss") if its else float("nan")
    if eps:
        last = eps[-1]
        for key in ("test_acc", "valid_ppl", "test_ppl"):
            if key in last:
                row[key] = fnum(last, key)
    cfg_path = os.path.join(folder, "config.json")
    if os.path.exists(cfg_path):
        try:
            cfg = json.load(open(cfg_path))
            row["params"] = cfg.get("params")
        except ValueError:
            pass
    return row


def speedups(rows):
    """Dense allreduce iteration time / each run's, for the same model, ranks and link:
    the baseline of the run's own grid, else the first grid that has one."""
    base, anyg = {}, {}
    for r in rows:
        if r["sparsifier"] == "none":
            base[(r["grid"], r["model"], r["ranks"], r["bandwidth"])] = r["iter_ms"]
            anyg.setdefault((r["model"], r["ranks"], r["bandwidth"]), r["iter_ms"])
    for r in rows:
        b = base.get((r["grid"], r["model"], r["ranks"], r["bandwidth"]),
                     anyg.get((r["model"], r["ranks"], r["bandwidth"])))
        r["speedup"] = b / r["iter_ms"] if b and r["iter_ms"] == r["iter_ms"] and r["iter_ms"] > 0 \
            else float("nan")


def fmt(v, spec):
    return "-" if v is None or v != v else format(v, spec)


def write_tables(rows, out):
    with open(os.path.join(out, "summary.json"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    lines = ["| run | P | link | sparsifier | d | iters | iter ms | fwd+bwd ms | exposed comm ms | "
             "select ms | exchange ms | decode ms | actual d | padding | speedup vs dense | loss | acc / ppl |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        quality = r.get("test_acc", r.get("valid_ppl"))
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            r["id"], r["ranks"], r["bandwidth"], r["sparsifier"], fmt(r["density"], "g"),
            r["iterations"], fmt(r["iter_ms"], ".1f"), fmt(r["fwd_ms"] + r["bwd_ms"], ".1f"),
            fmt(r["comm_ms"], ".1f"), fmt(r["sp_select_ms"], ".2f"), fmt(r["sp_exchange_ms"], ".1f"),
            fmt(r.get("sp_decode_ms"), ".1f"), fmt(r["sp_density"], ".4f"), fmt(r["sp_padding"], ".3f"), fmt(r["speedup"], ".2f"),
            fmt(r["loss"], ".3f"), fmt(quality, ".2f")))
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # Speedup matrix: sparsifier x (model, P, link).
    cols = sorted({(r["model"], r["ranks"], r["bandwidth"]) for r in rows},
                  key=lambda c: (c[0], c[1], _rate_bits(c[2])))
    sps = []
    for r in rows:
        key = (r["sparsifier"], r["density"], r.get("tag", ""))
        if key not in sps:
            sps.append(key)
    cell = {}
    for r in rows:  # a later grid with the same configuration does not hide an earlier one
        cell.setdefault((r["sparsifier"], r["density"], r.get("tag", ""), r["model"], r["ranks"],
                         r["bandwidth"]), r)
    head = "| sparsifier | d | " + " | ".join(f"{m} P={p} {bw}" for m, p, bw in cols) + " |"
    lines = [head, "|---|---|" + "---|" * len(cols)]
    for sp, d, tag in sps:
        vals = []
        for m, p, bw in cols:
            r = cell.get((sp, d, tag, m, p, bw))
            vals.append("-" if r is None else f"{fmt(r['speedup'], '.2f')}x ({fmt(r['iter_ms'], '.0f')} ms"
                        + ("" if sp == "none" else f", d' {fmt(r['sp_density'], '.4f')}") + ")")
        name = "dense allreduce" if sp == "none" else sp + (f" [{tag}]" if tag else "")
        lines.append(f"| {name} | {fmt(d, 'g')} | " + " | ".join(vals) + " |")
    with open(os.path.join(out, "speedup.md"), "w") as f:
        f.write("Speedup over dense allreduce: median iteration time after warm-up, and the "
                "measured actual density d' (values in the aggregated gradient / n)\n\n")
        f.write("\n".join(lines) + "\n")


def _rate_bits(bw):
    if bw == "none":
        return float("inf")
    m = re.match(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit)$", bw)
    scale = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}[m.group(2)]
    return float(m.group(1)) * scale


def figures(rows, runs, out):
    """Calls plot.py / plot_density.py; a figure that fails is reported, not fatal."""
    figdir = os.path.join(out, "figures")
    os.makedirs(figdir, exist_ok=True)
    jobs = []
    groups = {}
    for r in rows:
        groups.setdefault((r["grid"], r["model"], r["ranks"], r["bandwidth"]), []).append(r)
    for (g, m, p, bw), rs in sorted(groups.items()):
        tag = f"{g}_{m}_np{p}_{bw}"
        specs = [f"{_label(r)}={os.path.join(out, r['id'])}" for r in rs]
        sparse = [s for s, r in zip(specs, rs) if r["sparsifier"] != "none"]
        jobs.append(["plot.py", *specs, "-o", f"{figdir}/curves_{tag}.png", "--title", tag])
        jobs.append(["plot.py", "--kind", "times", *specs, "-o", f"{figdir}/times_{tag}.png",
                     "--title", tag])
        if sparse:
            jobs.append(["plot_density.py", *sparse, "-o", f"{figdir}/density_{tag}.png",
                         "--title", tag, "--smooth", "5"])
        pad = [s for s, r in zip(specs, rs) if r["sparsifier"] in ("micro", "exdyna")]
        if pad:
            jobs.append(["plot.py", "--kind", "padding", *pad, "-o", f"{figdir}/padding_{tag}.png",
                         "--title", tag])
    if any(r["bandwidth"] != "none" for r in rows):
        jobs.append(["plot.py", "--kind", "speedup", os.path.join(out, "summary.json"), "-o",
                     f"{figdir}/speedup_vs_bandwidth.png"])
    made = 0
    for job in jobs:
        # In this process (matplotlib is imported once, not once per figure).
        err = _run_script(os.path.join(HERE, job[0]), job[1:])
        if err:
            print(f"reproduce: figure {job[job.index('-o') + 1] if '-o' in job else job[-1]} "
                  f"failed: {err}", flush=True)
        else:
            made += 1
    return made, len(jobs)


def _run_script(path, args):
    """Runs a plotting script's main in this interpreter; returns an error text or None."""
    import contextlib
    import io
    import runpy
    saved = sys.argv
    sys.argv = [path] + list(args)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            runpy.run_path(path, run_name="__main__")
        return None
    except SystemExit as e:
        return None if e.code in (0, None) else (str(e.code) if not isinstance(e.code, int)
                                                 else sink.getvalue().strip()[-300:])
    except Exception as e:  # a figure must not stop the report
        return f"{type(e).__name__}: {e}"
    finally:
        sys.argv = saved
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")


def _label(r):
    name = r["sparsifier"] if r["density"] is None else f"{r['sparsifier']}@{r['density']:g}"
    return name + (f"[{r['tag']}]" if r.get("tag") else "")


def scaling(out, runs):
    comm_files = [os.path.join(out, r["id"], "comm.jsonl") for r in runs
                  if r["kind"] == "comm" and finished(os.path.join(out, r["id"]))]
    if not comm_files or not os.path.exists(os.path.join(out, "summary.json")):
        return None
    listing = os.path.join(out, SPARSIFIERS_JSON)
    if not os.path.exists(listing):
        print(f"reproduce: scaling model skipped: {listing} is missing (written by any call "
              "that finds the build)", flush=True)
        return None
    cmd = [PY, os.path.join(HERE, "scaling_model.py"), "--comm", *comm_files,
           "--summary", os.path.join(out, "summary.json"), "--sparsifiers-json", listing,
           "--out", out]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        print(f"reproduce: scaling model failed: {res.stderr.strip()}", flush=True)
        return None
    return res.stdout


def machine():
    """One line naming the machine: cores, CPU model, kernel, Open MPI."""
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, shell=True).stdout.strip()
        except OSError:
            return "?"
    model = sh("lscpu | sed -n 's/^Model name: *//p' | head -1") or "?"
    mpi = sh("ompi_info --version 2>/dev/null | head -1") or "no ompi_info"
    return f"nproc {sh('nproc')}, {model}, Linux {sh('uname -r')}, {mpi}"


def measured_span(out, runs):
    """'first start .. last end UTC (N runs)' from the finished runs' run.json, so a report
    rebuilt later (--report-only) still says when its numbers were measured."""
    spans = []
    for r in runs:
        try:
            info = json.load(open(os.path.join(out, r["id"], "run.json")))
            start = datetime.datetime.fromisoformat(info["start"].rstrip("Z"))
            spans.append((start, start + datetime.timedelta(seconds=info.get("wall_s", 0))))
        except (OSError, ValueError, KeyError):
            continue
    if not spans:
        return "-"
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    return f"{first:%Y-%m-%d %H:%M} .. {last:%Y-%m-%d %H:%M} UTC ({len(spans)} runs)"


def write_report(out, config, argv, runs=()):
    """report.md: everything the run produced, with command, machine and dates."""
    parts = [f"# Reproduction report ({os.path.basename(config)})", "",
             f"- Command: `scripts/reproduce.sh {shlex.join(argv)}`",
             f"- Config: `{config if os.path.relpath(config, ROOT).startswith('..') else os.path.relpath(config, ROOT)}`",
             f"- Machine: {machine()}",
             f"- Measured: {measured_span(out, runs)}",
             f"- Report written: {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC')}", ""]
    for name, title in (("speedup.md", "Speedup over dense allreduce"),
                        ("summary.md", "All runs (medians after warm-up)"),
                        ("scaling.md", "Scaling model")):
        path = os.path.join(out, name)
        if os.path.exists(path):
            parts += [f"## {title}", "", open(path).read().strip(), ""]
    figdir = os.path.join(out, "figures")
    if os.path.isdir(figdir):
        parts += ["## Figures", ""] + [f"- figures/{f}" for f in sorted(os.listdir(figdir))]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(parts) + "\n")


# ---------------------------------------------------------------- one paper task


def task_rows(exe):
    """`sparsetrain tasks --json`: the papers' tasks with their commands and whether the
    model and the data are here (the binary asks its registry and the data folders)."""
    res = subprocess.run([exe, "tasks", "--json"], capture_output=True, text=True)
    if res.returncode != 0:
        raise ConfigError(f"`{exe} tasks --json` failed ({res.stderr.strip()[-200:]}); "
                          "rebuild sparsetrain")
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def _replace_flag(args, flag, values):
    """args with `flag`'s values replaced (appended when absent)."""
    out = list(args)
    if flag in out:
        i = out.index(flag)
        out[i + 1:i + 1 + len(values)] = values
    else:
        out += [flag] + values
    return out


def task_command(row, exe, out, epochs=None, np=None, max_iters=None):
    """The row's command with this build's binary, --out, and a shortened run's changes:
    --epochs E (the warm-up capped at E / 5 epochs so the run reaches the paper's rate),
    -np N (the learning rate stays the paper's at its own rank count), --max-iters."""
    args = list(row["train_args"])
    if epochs is not None:
        args = _replace_flag(args, "--epochs", [str(epochs)])
        if "--warmup-epochs" in args:
            w = float(args[args.index("--warmup-epochs") + 1])
            if w > epochs / 5:
                args = _replace_flag(args, "--warmup-epochs", [f"{epochs / 5:g}"])
    if max_iters is not None:
        args += ["--max-iters", str(max_iters)]
    args += ["--out", out, "--overwrite"]
    p = np or row["ranks"]
    launcher = MPI + ["-np", str(p)] if p > 1 else []
    return launcher + [exe, "train"] + args


def run_task(a, build):
    """scripts/reproduce.sh --task NAME: one row of `sparsetrain tasks`, or a one-line
    refusal naming what is missing. Returns the exit code."""
    exe = os.path.join(build, "apps", "sparsetrain")
    if not os.path.exists(exe):
        print(f"reproduce: {exe} not found (build it, or pass --build DIR)", file=sys.stderr)
        return 2
    try:
        rows = task_rows(exe)
    except ConfigError as e:
        print(f"reproduce: {e}", file=sys.stderr)
        return 2
    row = next((r for r in rows if r["name"] == a.task), None)
    if row is None:
        print(f"reproduce: unknown task '{a.task}'; valid: "
              f"{', '.join(r['name'] for r in rows)}", file=sys.stderr)
        return 2
    if not row["arch_available"]:
        print(f"reproduce: task {a.task} needs --arch {row['arch']}, which this build of "
              f"sparsetrain does not have (`sparsetrain models` lists those it has)",
              file=sys.stderr)
        return 2
    if not row["data_present"]:
        print(f"reproduce: task {a.task} needs dataset {row['dataset']}, not found: put "
              f"{row['data_hint']} in {row['data_dir']} (or set SPARSETRAIN_DATA to the "
              f"folder holding {os.path.basename(row['data_dir'])}/)", file=sys.stderr)
        return 2
    out = os.path.abspath(a.out or os.path.join(ROOT, "runs", "tasks", a.task))
    cmd = task_command(row, exe, out, a.epochs, a.np, a.max_iters)
    print(f"reproduce: task {a.task} ({row['paper']}: {row['arch']} on {row['dataset']}, "
          f"d = {row['density']:g}; values from {row['source']})", flush=True)
    print(f"reproduce: $ {shlex.join(cmd)}", flush=True)
    if a.dry_run:
        return 0
    os.makedirs(os.path.dirname(out), exist_ok=True)
    start = time.time()
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    print(f"reproduce: task {a.task} {'done' if rc == 0 else f'FAILED (exit {rc})'} in "
          f"{time.time() - start:.0f} s; outputs in {out}", flush=True)
    return rc


# ---------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the reduced grid (scripts/experiments/quick.conf)")
    ap.add_argument("--config", help="grid config (default scripts/experiments/full.conf)")
    ap.add_argument("--out", help="output folder (default runs/reproduce or runs/reproduce_quick)")
    ap.add_argument("--build", default=os.environ.get("SPARSETRAIN_BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--comm-bench", help="comm_bench binary (default BUILD/bench/comm_bench)")
    ap.add_argument("--dry-run", action="store_true", help="list the grid and what would run; run nothing")
    ap.add_argument("--only", default="", help="run only runs whose id contains one of these "
                    "comma-separated substrings")
    ap.add_argument("--no-report", action="store_true", help="skip tables and figures")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing; tables, figures and model from the runs finished so far")
    ap.add_argument("--task", help="run one task of `sparsetrain tasks` (its paper's command) "
                    "instead of a grid; refuses in one line when its model or data is missing")
    ap.add_argument("--epochs", type=int, help="with --task: train this many epochs (a smoke run)")
    ap.add_argument("--np", type=int, help="with --task: ranks (default the paper's)")
    ap.add_argument("--max-iters", type=int, help="with --task: stop after this many steps")
    a = ap.parse_args(argv)
    for flag, value in (("--epochs", a.epochs), ("--np", a.np), ("--max-iters", a.max_iters)):
        if value is not None and value < 1:
            ap.error(f"{flag} must be at least 1, got {value}")
        if value is not None and not a.task:
            ap.error(f"{flag} goes with --task (a grid's epochs are in its config)")
    if a.task:
        return run_task(a, os.path.abspath(a.build))
    exp = os.path.join(HERE, "experiments")
    config = a.config or os.path.join(exp, "quick.conf" if a.quick else "full.conf")
    out = os.path.abspath(a.out or os.path.join(ROOT, "runs", "reproduce_quick" if a.quick else "reproduce"))
    build = os.path.abspath(a.build)
    comm_bench = os.path.abspath(a.comm_bench or os.path.join(build, "bench", "comm_bench"))

    sps, archs, listing = sparsetrain_names(build)
    if sps is None and not a.dry_run and not a.report_only:
        print(f"reproduce: {build}/apps/sparsetrain not found (build it, or pass --build DIR)",
              file=sys.stderr)
        return 2
    if listing and not a.dry_run:
        # The methods' exchange patterns for the scaling model, kept with the runs so that
        # --report-only works without a build.
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, SPARSIFIERS_JSON), "w") as f:
            f.write(listing)
    try:
        runs = expand(parse_config(config, sps, archs))
    except ConfigError as e:
        print(f"reproduce: config error: {e}", file=sys.stderr)
        return 2
    only = split_list(a.only) or [""]
    todo = [r for r in runs if any(o in r["id"] for o in only)]
    if sps is not None and not a.report_only:
        bad = check_flags([r for r in todo if not finished(os.path.join(out, r["id"]))], build, out)
        for line in bad:
            print(f"reproduce: config error: {line}", file=sys.stderr)
        if bad:
            return 2
    if any(r["kind"] == "comm" and not finished(os.path.join(out, r["id"])) for r in todo) and \
            not a.dry_run and not a.report_only and not os.path.exists(comm_bench):
        print(f"reproduce: {config} has comm lines to run but {comm_bench} is missing "
              f"(cmake --build {build} --target comm_bench, or --comm-bench PATH)", file=sys.stderr)
        return 2
    print(f"reproduce: {config}: {len(runs)} runs ({len(todo)} selected) -> {out}", flush=True)
    failed = []
    for i, r in enumerate(todo, 1):
        folder = os.path.join(out, r["id"])
        head = f"[{i}/{len(todo)}] {r['id']}"
        if finished(folder):
            print(f"{head}: finished earlier, skipped", flush=True)
            continue
        if a.report_only:
            continue
        cmd = command(r, build, folder, comm_bench)
        if a.dry_run:
            print(f"{head}: would run: {shlex.join(cmd)}", flush=True)
            continue
        if os.path.isdir(folder):
            subprocess.run(["rm", "-rf", folder], check=True)  # an interrupted attempt
        os.makedirs(folder)
        print(f"{head}: running ...", flush=True)
        rc, wall = run_one(r, cmd, folder, os.path.join(folder, "log.txt"))
        if rc != 0:
            tail = open(os.path.join(folder, "log.txt")).read().strip().splitlines()[-3:]
            print(f"{head}: FAILED (exit {rc}) after {wall:.0f} s; log {folder}/log.txt: "
                  + " | ".join(tail), flush=True)
            failed.append(r["id"])
            continue
        msg = f"{head}: done in {wall:.0f} s"
        if r["kind"] == "train":
            s = summarize_train(r, folder)
            msg += f", median iteration {s['iter_ms']:.1f} ms over {s['iterations']} iterations"
        print(msg, flush=True)
    if a.dry_run or a.no_report:
        return 1 if failed else 0
    rows = []
    for r in runs:
        folder = os.path.join(out, r["id"])
        if r["kind"] == "train" and finished(folder):
            rows.append(summarize_train(r, folder))
    if rows:
        speedups(rows)
        write_tables(rows, out)
        made, total = figures(rows, runs, out)
        print(f"reproduce: {len(rows)} runs summarised: {out}/summary.md, {out}/speedup.md; "
              f"{made}/{total} figures in {out}/figures", flush=True)
    model = scaling(out, runs)
    if model:
        print(model.strip(), flush=True)
    if rows:
        write_report(out, config, sys.argv[1:] if argv is None else argv, runs)
        print(f"reproduce: wrote {out}/report.md", flush=True)
    if failed:
        print(f"reproduce: {len(failed)} run(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
