"""sparsetrain's methods against PyTorch's own compression on a slow link: 4 ranks on
Fashion-MNIST behind a rate-limited loopback (scripts/netns_run.sh), each run one row of
a table with its wall time, mean step time (and that of its last 10 steps, with the density
of its last step, where an adaptive threshold is still settling) and test accuracy.

Runs (--runs, comma-separated; all by default):
  torch:dense  torch:fp16  torch:powersgd1  torch:powersgd2       PyTorch DDP on gloo
  torch:topk  torch:micro  torch:exdyna  torch:sidco-e            DDP + sparsetrain_torch.hook
  cli:none  cli:topk  cli:micro  cli:exdyna  cli:sidco-e          the sparsetrain CLI (Open MPI
                                                                  over TCP on the same link)
A sparsifier's run may carry --sp settings after a '+': torch:micro+up=1.1 (MiCRO whose
threshold climbs 10% a step above the density band instead of the paper's 0.5%). On
request also torch:dgc and cli:dgc; torch:dgc+momentum=0.9 is DGC with its momentum
correction, for which the optimiser's momentum is 0 (the rank keeps the momentum).
Both sides train the same network (torch: bench/torch_train_step.py's CIFAR ResNets and
twins) with SGD momentum 0.9 (but see DGC above), weight decay 5e-4, --lr for the global
batch after a linear warm-up of 100 steps (then --schedule), --batch images per rank,
d = --density for the sparsifiers. The peer pads the 28x28 images to 32x32 over 3
channels without augmentation; the CLI reads them as its fashion-mnist loader does
(random crop with padding 2 and flips, 1 channel).

  /usr/bin/python3 bench/slow_link_compare.py --build build --model resnet20 --epochs 3
  /usr/bin/python3 bench/slow_link_compare.py --build build --model resnet18_cifar --steps 50
  ... --rate none            (no namespace: the hook's own overhead against dense DDP)
  ... --bucket-cap-mb 5      (DDP's buckets for the torch runs; PowerSGD keeps one bucket)
  ... --density 0.04         (the sparsifiers' d; the dense runs ignore it)
  ... --schedule cosine      (the rate decays to zero by the last epoch on both sides)

"KB sent" is what rank 0 put into the exchange's collectives at the last step, before the
collectives' own traffic: a sparsifier's `sp_bytes` (indices, values and counts), PowerSGD's
factors and the tensors it leaves dense (from its state's element count).

Each run's log goes to
--out/<model>_<rate>_<run>[_bucket<MB>mb][_d<density>][_cosine][_seed<S>].log, and a
finished run is not run again (delete its log to redo it). Prints one JSON line per run,
then a Markdown table with each step time against DDP + PowerSGD rank 2's. Needs root
(ip netns, tc) for a rate.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TORCH_RUNS = ["dense", "fp16", "powersgd1", "powersgd2", "topk", "micro", "exdyna", "sidco-e"]
CLI_RUNS = ["none", "topk", "micro", "exdyna", "sidco-e"]
ALL_RUNS = [f"torch:{r}" for r in TORCH_RUNS] + [f"cli:{r}" for r in CLI_RUNS]
EXTRA_RUNS = ["torch:dgc", "cli:dgc"]  # on request only (--runs)
WARMUP_STEPS = 100  # the peer's linear warm-up; the CLI gets it as a fraction of an epoch
TRAIN_IMAGES = 60000
DDP_BUCKET_MB = 25  # DDP's own default bucket_cap_mb
DEFAULT_DENSITY = 0.01


def link_prefix(rate):
    if rate == "none":
        return []
    return [os.path.join(ROOT, "scripts", "netns_run.sh"), rate, "--"]


DENSE_RUNS = ["dense", "fp16", "powersgd1", "powersgd2", "none"]


def split_run(run):
    """'torch:micro+up=1.1' -> ('torch', 'micro', ['up=1.1'])."""
    side_method, *sp = run.split("+")
    side, method = side_method.split(":")
    return side, method, sp


def optimizer_momentum(sp):
    """0.9, or 0 where DGC's momentum correction (--sp momentum=m > 0) keeps the momentum
    on each rank: the optimiser then applies the exchanged update as it is (DGC Sec. 3.2)."""
    m = dict(kv.split("=", 1) for kv in sp).get("momentum")
    return "0" if m is not None and float(m) > 0 else "0.9"


def torch_command(a, method, sp):
    hook = method if method in DENSE_RUNS else "stt"
    cmd = ["env", "GLOO_SOCKET_IFNAME=lo",
           f"PYTHONPATH={os.path.join(os.path.abspath(a.build), 'pytorch', 'python')}",
           sys.executable, os.path.join(HERE, "torch_ddp_fmnist.py"), "--world", str(a.world),
           "--arch", a.model, "--hook", hook, "--batch", str(a.batch), "--lr", str(a.lr),
           "--warmup-steps", str(WARMUP_STEPS), "--schedule", a.schedule, "--seed", str(a.seed),
           "--momentum", optimizer_momentum(sp),
           "--threads", "1", "--bucket-cap-mb", str(a.bucket_cap_mb)]
    if hook == "stt":
        cmd += ["--method", method, "--density", str(a.density)]
        if sp:
            cmd += ["--sp", *sp]
    if a.steps:
        cmd += ["--epochs", "1", "--max-steps", str(a.steps), "--test-subset", "500"]
    else:
        cmd += ["--epochs", str(a.epochs)]
    return cmd


def cli_command(a, method, sp, out):
    steps_per_epoch = TRAIN_IMAGES // (a.batch * a.world)
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(a.world),
           "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
           "--mca", "oob_tcp_if_include", "lo",
           os.path.join(a.build, "apps", "sparsetrain"), "train", "--arch", a.model,
           "--dataset", "fashion-mnist", "-b", str(a.batch), "--lr", str(a.lr),
           "--momentum", optimizer_momentum(sp), "--wd", "5e-4", "--schedule", a.schedule,
           "--warmup-epochs", f"{WARMUP_STEPS / steps_per_epoch:.6f}", "--seed", str(a.seed),
           "--sparsifier", method, "--density", str(a.density), "--threads", "1",
           "--out", out, "--overwrite", "-q"]
    if sp:
        cmd += ["--sp", *sp]
    if a.steps:
        cmd += ["--epochs", "1", "--max-iters", str(a.steps), "--test-subset", "500"]
    else:
        cmd += ["--epochs", str(a.epochs)]
    return cmd


def torch_result(log):
    """The peer's per-epoch accuracies and its summary line."""
    epochs, summary = [], None
    for line in open(log):
        if line.startswith("{"):
            d = json.loads(line)
            if d.get("summary"):
                summary = d
            elif "epoch" in d:
                epochs.append(d["test_acc"])
    if summary is None:
        return None
    return {"wall_s": summary["wall_s"], "step_ms": summary["step_ms"],
            "step_ms_last10": summary.get("step_ms_last10"),
            "sp_density": summary.get("sp_density"), "sp_bytes": summary.get("sp_bytes"),
            "epoch_acc": epochs}


def cli_result(log, out):
    """The CLI's last JSON line (wall time, mean step) and epochs.csv's accuracies."""
    last = None
    for line in open(log):
        if line.startswith("{\"steps\""):
            last = json.loads(line)
    if last is None:
        return None
    with open(os.path.join(out, "epochs.csv")) as f:
        accs = [float(r["test_acc"]) for r in csv.DictReader(f)]
    with open(os.path.join(out, "iterations.csv")) as f:
        its = list(csv.DictReader(f))
    tail = [float(r["wall_s"]) for r in its[-11:]]
    last10 = round(1e3 * (tail[-1] - tail[0]) / (len(tail) - 1), 2) if len(tail) > 1 else None
    density = float(its[-1]["sp_density"]) if its and its[-1].get("sp_density") else None
    sent = int(float(its[-1]["sp_bytes"])) if its and its[-1].get("sp_bytes") else None
    return {"wall_s": last["seconds"], "step_ms": last["step_ms"], "step_ms_last10": last10,
            "sp_density": density, "sp_bytes": sent, "epoch_acc": accs}


def run_one(a, run, stem):
    side, method, sp = split_run(run)
    log = stem + ".log"
    out = stem + "_run"
    if os.path.exists(log):  # finished before: read it again
        r = torch_result(log) if side == "torch" else cli_result(log, out)
        if r is not None:
            return r
    cmd = link_prefix(a.rate) + (torch_command(a, method, sp) if side == "torch"
                                 else cli_command(a, method, sp, out))
    print(f"slow_link_compare: {run}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    with open(log + ".part", "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        sys.exit(f"slow_link_compare: {run} failed (exit {rc}); see {log}.part")
    os.replace(log + ".part", log)
    return torch_result(log) if side == "torch" else cli_result(log, out)


def table(rows, a):
    base = next((r["step_ms"] for r in rows if r["run"] == "torch:powersgd2"), None)
    head = ("| run | wall time (s) | mean step (ms) | step / PowerSGD r2 | last 10 steps (ms) |"
            " density, last step | KB sent, last step |")
    accs = max(len(r["epoch_acc"]) for r in rows) if not a.steps else 0
    head += "".join(f" test acc. epoch {i + 1} (%) |" for i in range(accs))
    lines = [head, "|" + "---|" * (7 + accs)]
    for r in rows:
        ratio = f"{r['step_ms'] / base:.2f}" if base else "-"
        last10, density, sent = r.get("step_ms_last10"), r.get("sp_density"), r.get("sp_bytes")
        cells = [r["run"], f"{r['wall_s']:.0f}", f"{r['step_ms']:.0f}", ratio,
                 f"{last10:.0f}" if last10 else "-", f"{density:.4f}" if density else "-",
                 f"{sent / 1e3:.1f}" if sent else "-"]
        cells += [f"{v:.2f}" for v in r["epoch_acc"][:accs]]
        cells += ["-"] * (accs - len(r["epoch_acc"][:accs]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--model", default="resnet20", help="resnet20, resnet18_cifar, ...")
    p.add_argument("--rate", default="100mbit", help="tc rate of the link, or none")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop each run after this many steps "
                   "(step time only; the test accuracy is then on 500 images)")
    p.add_argument("--batch", type=int, default=32, help="images per rank and step")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--density", type=float, default=DEFAULT_DENSITY)
    p.add_argument("--schedule", default="constant", choices=["constant", "cosine"],
                   help="after the warm-up: hold --lr, or decay it to zero by the last epoch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bucket-cap-mb", type=float, default=DDP_BUCKET_MB,
                   help="DDP's bucket size for the torch runs (PowerSGD keeps one bucket)")
    p.add_argument("--runs", default=",".join(ALL_RUNS))
    p.add_argument("--out", default="runs/slow_link")
    a = p.parse_args()
    if not 0 < a.density <= 1:
        sys.exit(f"slow_link_compare: --density {a.density} must be in (0, 1]")
    if a.bucket_cap_mb <= 0:
        sys.exit(f"slow_link_compare: --bucket-cap-mb {a.bucket_cap_mb} must be positive")
    runs = [r for r in a.runs.split(",") if r]
    for r in runs:
        side, method, sp = split_run(r) if r.count(":") == 1 else ("", "", [])
        if f"{side}:{method}" not in ALL_RUNS + EXTRA_RUNS:
            sys.exit(f"slow_link_compare: unknown run '{r}' in --runs; valid: "
                     f"{', '.join(ALL_RUNS + EXTRA_RUNS)}"
                     " (a sparsifier's run may end in +KEY=VALUE)")
        if sp and (method in DENSE_RUNS or not all("=" in kv for kv in sp)):
            sys.exit(f"slow_link_compare: run '{r}': only a sparsifier's run takes +KEY=VALUE")
    if a.rate != "none" and os.geteuid() != 0:
        sys.exit("slow_link_compare: --rate needs root (ip netns, tc); use --rate none without")
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for run in runs:
        stem = os.path.join(a.out, f"{a.model}_{a.rate}_{run.replace(':', '_')}")
        if run.startswith("torch:") and "powersgd" not in run and a.bucket_cap_mb != DDP_BUCKET_MB:
            stem += f"_bucket{a.bucket_cap_mb:g}mb"
        if split_run(run)[1] not in DENSE_RUNS and a.density != DEFAULT_DENSITY:
            stem += f"_d{a.density:g}"
        if a.schedule != "constant":
            stem += f"_{a.schedule}"
        if a.seed != 0:
            stem += f"_seed{a.seed}"
        r = run_one(a, run, stem)
        if r is None:
            sys.exit(f"slow_link_compare: {run} printed no result; see {stem}.log")
        row = {"run": run, "model": a.model, "rate": a.rate, "world": a.world, "batch": a.batch,
               "density": a.density, "seed": a.seed, "bucket_cap_mb": a.bucket_cap_mb, **r}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(table(rows, a))


if __name__ == "__main__":
    main()
