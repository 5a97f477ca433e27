"""LSTM language model against PyTorch: the 2-layer LSTM language model (hidden 200) trained by sparsetrain
and by PyTorch 1.13 on the same fortunes split and vocabulary with the same
hyperparameters and epochs, then the step time of both on the same shapes.

 1. `sparsetrain train --arch lstm` on the fortunes corpus (it writes the split it uses to
    <out>/sparsetrain/corpus), then bench/torch_lstm_lm.py on those files;
 2. bench/lstm_step_bench vs torch_lstm_lm.py --step, alternating for --rounds, keeping
    each side's best median (PyTorch runs with OMP_WAIT_POLICY passive and active, and
    its better result counts; lstm_step_bench sets the wait policy the sparsetrain CLI
    uses, core/parallel.h).

Prints JSON lines and a final summary: validation perplexities and their relative gap
(with --seeds, per seed and the gap of the means; target: within 2%), step times and
their ratio sparsetrain / torch (target: at most 0.80), from the training runs and from
the step benchmark.

  /usr/bin/python3 bench/compare_lstm.py --build build [--epochs 2] [--threads 2] [--seeds 1,2,3]
      [--out runs/lstm_compare] [--rounds 3] [--skip-train] [--skip-step]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in output:\n" + text[-2000:])


def run(cmd, env=None):
    print("compare_lstm: " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"compare_lstm: command failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p.stdout


def mean(xs):
    return sum(xs) / len(xs)


def perplexity_summary(ours, theirs, target):
    """The sides' validation perplexities per seed and their means. Different generators
    draw each side's initial weights and dropout masks, so one seed's gap mixes the
    implementations' difference with that noise; the spread over seeds says how large the
    noise is, and the gap of the means is what the target judges."""
    ov = [r["valid_ppl"] for r in ours]
    tv = [r["valid_ppl"] for r in theirs]
    gap = (mean(ov) - mean(tv)) / mean(tv)
    return {"seeds": [r["seed"] for r in ours],
            "sparsetrain_valid_ppl": [round(x, 2) for x in ov],
            "torch_valid_ppl": [round(x, 2) for x in tv],
            "sparsetrain_valid_ppl_mean": round(mean(ov), 2),
            "torch_valid_ppl_mean": round(mean(tv), 2),
            "sparsetrain_test_ppl_mean": round(mean([r["test_ppl"] for r in ours]), 2),
            "torch_test_ppl_mean": round(mean([r["test_ppl"] for r in theirs]), 2),
            "valid_ppl_gap": round(gap, 4), "ppl_target": target, "ppl_met": abs(gap) <= target,
            "train_sparsetrain_step_ms": round(mean([r["step_ms"] for r in ours]), 3),
            "train_torch_step_ms": round(mean([r["step_ms"] for r in theirs]), 3),
            "train_time_ratio": round(mean([r["step_ms"] for r in ours])
                                      / mean([r["step_ms"] for r in theirs]), 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="runs/lstm_compare")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--emsize", type=int, default=200)
    ap.add_argument("--bptt", type=int, default=35)
    ap.add_argument("-b", "--batch", type=int, default=20)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--lr", type=float, default=20.0)
    ap.add_argument("--clip", type=float, default=0.25)
    ap.add_argument("--rounds", type=int, default=3, help="step-benchmark rounds")
    ap.add_argument("--reps", type=int, default=20, help="steps per step-benchmark run")
    ap.add_argument("--seeds", default="1",
                    help="comma-separated seeds: each side trains once per seed, the means compare")
    ap.add_argument("--ppl-target", type=float, default=0.02,
                    help="largest relative gap of the mean validation perplexities")
    ap.add_argument("--step-target", type=float, default=0.80,
                    help="largest step-time ratio sparsetrain / torch")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-step", action="store_true")
    a = ap.parse_args()
    exe = os.path.join(a.build, "apps", "sparsetrain")
    bench = os.path.join(a.build, "bench", "lstm_step_bench")
    torch_py = ["/usr/bin/python3", os.path.join(HERE, "torch_lstm_lm.py")]
    model = ["--layers", str(a.layers), "--hidden", str(a.hidden), "--emsize", str(a.emsize),
             "--bptt", str(a.bptt), "--dropout", str(a.dropout)]
    summary = {"bench": "lstm_compare", "epochs": a.epochs, "threads": a.threads,
               "layers": a.layers, "hidden": a.hidden, "batch": a.batch}

    if not a.skip_train:
        if not os.path.exists(exe):
            sys.exit(f"compare_lstm: {exe} not found; build first")
        seeds = [int(x) for x in a.seeds.split(",")]
        ours_runs, their_runs = [], []
        for seed in seeds:
            out = os.path.join(a.out, f"sparsetrain_seed{seed}")
            ours = last_json(run([exe, "train", "--arch", "lstm", "--dataset", "fortunes",
                                  "--epochs", str(a.epochs), "-b", str(a.batch), "--lr", str(a.lr),
                                  "--clip", str(a.clip), "--threads", str(a.threads), "--out", out,
                                  "--seed", str(seed), "--quiet"] + model))
            ours.update({"impl": "sparsetrain", "seed": seed})
            print(json.dumps(ours), flush=True)
            env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))
            theirs = last_json(run(torch_py + ["--data", os.path.join(out, "corpus"),
                                               "--epochs", str(a.epochs), "-b", str(a.batch),
                                               "--lr", str(a.lr), "--clip", str(a.clip),
                                               "--threads", str(a.threads), "--seed", str(seed)]
                                   + model, env=env))
            theirs["seed"] = seed
            print(json.dumps(theirs), flush=True)
            ours_runs.append(ours)
            their_runs.append(theirs)
        summary.update(perplexity_summary(ours_runs, their_runs, a.ppl_target))

    if not a.skip_step:
        if not os.path.exists(bench):
            sys.exit(f"compare_lstm: {bench} not found; build the lstm_step_bench target")
        shape = ["--layers", str(a.layers), "--hidden", str(a.hidden), "--emsize", str(a.emsize),
                 "--bptt", str(a.bptt), "--batch", str(a.batch), "--dropout", str(a.dropout),
                 "--reps", str(a.reps), "--threads", str(a.threads)]
        best = {}
        for r in range(a.rounds):
            runs = [("sparsetrain", [bench] + shape, dict(os.environ))]
            for policy in ("passive", "active"):
                runs.append(("torch", torch_py + ["--step"] + shape, dict(os.environ, OMP_WAIT_POLICY=policy)))
            for impl, cmd, env in runs:
                d = last_json(run(cmd, env=env))
                print(json.dumps(d), flush=True)
                if impl not in best or d["step_ms"] < best[impl]["step_ms"]:
                    best[impl] = d
        o, t = best["sparsetrain"], best["torch"]
        summary.update({"step_sparsetrain_ms": o["step_ms"], "step_torch_ms": t["step_ms"],
                        "step_torch_omp_wait_policy": t.get("omp_wait_policy"),
                        "step_time_ratio": round(o["step_ms"] / t["step_ms"], 3)})
    if "step_time_ratio" in summary:
        summary["step_time_ratio_met"] = summary["step_time_ratio"] <= a.step_target
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
